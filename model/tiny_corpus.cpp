// A small English corpus for training the tiny test tokenizer (MODEL.md §11). The
// prose was written for troupe and is free to use; the generated index and numbers give
// BPE enough distinct words to learn the ~3.8k merges of a 4096-token vocab.
#include "model/tiny_corpus.h"

#include <set>

namespace troupe::model {
namespace {

constexpr std::string_view kProse = R"CORPUS(
Once upon a time, in a small village between two green hills, there lived an old miller and his
three daughters. The eldest was clever, the middle one was kind, and the youngest could sing so
sweetly that the birds stopped to listen. Every morning the miller walked down to the river,
opened the gate of the mill, and watched the great wheel begin to turn.

One winter the river froze, and the wheel stood still. "What shall we do?" asked the eldest
daughter. "We have flour for only ten days." The miller scratched his beard and said nothing for a
long while. At last he answered, "We will wait, and we will share what we have." So they shared
their bread with the neighbours, and the neighbours shared their wood, and nobody in the village
went hungry or cold.

When spring came, the ice cracked with a sound like thunder. The water rushed down from the
mountains, the wheel turned again, and the youngest daughter sang from the top of the stairs.
People said it was the happiest spring that anyone could remember.

The Fox and the Crow

A crow found a piece of cheese and flew up into a tall tree to eat it. A hungry fox saw her and
thought of a plan. "Good morning, beautiful bird," said the fox. "Your feathers shine like silver
in the sun. Surely a bird so lovely must have a voice to match." The crow was pleased, and she
opened her beak to sing. The cheese fell to the ground, and the fox caught it at once. "Thank
you," he said, walking away. "Next time, think before you trust a flatterer."

The Tortoise and the Hare

The hare laughed at the tortoise for being slow. "Let us race," said the tortoise quietly, "from
this stone to the old oak by the pond." The hare ran far ahead, then lay down in the shade to
rest, certain that he had plenty of time. He fell asleep. The tortoise kept walking, step after
step, never stopping, and when the hare woke up the tortoise was already resting under the oak.
Slow and steady wins the race.

A Letter Home

Dear Mother,
I arrived in the city on Tuesday evening after a long journey by train. The station was crowded
and noisy, but my cousin was waiting for me near the clock, just as we had planned. The room I
rent is small, with one window that looks over a narrow street full of shops. In the morning I can
hear the baker opening his doors and the children running to school.
Work at the library began on Wednesday. I sort the new books, repair the old ones, and help
visitors find what they need. Yesterday a little girl asked me for a book about stars, and we
spent an hour looking at pictures of comets and planets together. I think I will like it here.
Please tell Father that I have not forgotten my promise to write every week. I miss the garden,
the dog, and your soup on cold evenings.
With love,
Your son

Notes on the Weather

The weather this year has been unusual. January was mild, with rain instead of snow. February
brought strong winds from the north and two heavy storms. In March the temperature rose quickly,
and the first flowers opened three weeks earlier than usual. April was dry and bright. May was
warm, with short showers in the afternoon. June, July and August were hot; on some days the
thermometer showed more than thirty degrees. September was pleasant, October was wet, November was
grey, and December ended the year with clear, frosty nights.

How to Bake Simple Bread

You will need five hundred grams of flour, ten grams of salt, seven grams of dry yeast, and three
hundred and fifty millilitres of warm water. Mix the flour, salt and yeast in a large bowl. Add
the water slowly and stir until a soft dough forms. Turn the dough onto a table and knead it for
ten minutes, until it is smooth and elastic. Place it back in the bowl, cover it with a cloth, and
leave it in a warm place for one hour, or until it has doubled in size. Shape the dough into a
loaf, let it rise for another thirty minutes, and bake it at two hundred and twenty degrees for
about thirty five minutes. The bread is ready when it sounds hollow as you tap the bottom.

A Conversation at the Market

"How much are the apples today?"
"Two coins for a bag, or three bags for five coins."
"And the pears?"
"The pears are sweeter this week. Try one, if you like."
"They are very good. I will take a bag of each, please."
"Here you are. Would you like some honey as well? It is fresh from my brother's farm."
"Not today, thank you. Maybe next time."
"Have a nice day!"
"You too!"

On Learning

It is often said that the best way to learn something is to teach it to someone else. When we
explain an idea, we discover which parts we truly understand and which parts we only remember.
Questions from a student can show us the gaps in our own knowledge. A good teacher is therefore
also a good learner, always curious, always ready to say, "I do not know, but let us find out
together."
Learning takes patience. A musician practises the same few bars many times before they sound
right. A painter fills whole notebooks with sketches before beginning a single canvas. A child
falls down again and again while learning to walk, and each time gets up and tries once more.
Mistakes are not the opposite of learning; they are part of it.

The Lighthouse Keeper

On a rocky island far from the coast there stood a white lighthouse, and in the lighthouse lived a
keeper named Thomas. Every evening he climbed the one hundred and twelve steps to the lamp room,
cleaned the glass, trimmed the wick, and lit the great lamp. All night the beam swept across the
dark water, warning ships away from the rocks. In the morning he wrote in his log: the time the
lamp was lit, the time it was put out, the direction of the wind, and the name of any ship that
passed.
Thomas was never lonely. He had a cat, a shelf of books, a small garden of potatoes and beans, and
the company of the sea birds. Once a month a boat brought him letters, oil and food. He wrote long
replies to his sister, describing the colours of the sky, the moods of the sea, and the whales
that sometimes rose near the island to breathe.

Questions and Answers

What is the largest planet in our solar system? Jupiter is the largest planet. How many days are
there in a leap year? There are three hundred and sixty six days. Which animal is known as the
ship of the desert? The camel is often called the ship of the desert. Why is the sky blue?
Sunlight is scattered by the air, and blue light is scattered more than red light. What do bees
make? Bees make honey and wax. Where does rain come from? Water rises from seas, lakes and rivers
as vapour, forms clouds, and falls again as rain.

A Short History of the Bridge

The old stone bridge was built in 1642 by the people of the town, who carried every stone from the
quarry on the hill. It has five arches and is one hundred and eighty metres long. In 1788 a flood
damaged two of the arches, and they were rebuilt the following summer. In 1854 the bridge was
widened so that carriages could pass each other. Gas lamps were added in 1871 and electric lights
in 1923. Today the bridge is closed to cars, and on warm evenings it is full of people walking,
talking and watching the sunset over the river.

Counting and Measuring

One, two, three, four, five, six, seven, eight, nine, ten. Eleven, twelve, thirteen, fourteen,
fifteen, sixteen, seventeen, eighteen, nineteen, twenty. A week has 7 days, a year has 12 months,
and a day has 24 hours of 60 minutes each. Water freezes at 0 degrees and boils at 100 degrees. A
metre has 100 centimetres and a kilometre has 1000 metres. The recipe serves 4 people and takes 45
minutes. The train leaves at 8:15 and arrives at 11:40. The price was 3.50, then 4.25, and now it
is 5.00.

Small Things

The smell of rain on dry earth. A cup of tea when the hands are cold. The first page of a new
book. A letter from an old friend. The sound of the sea at night. Bread still warm from the oven.
A dog waiting at the door. Snow falling on a quiet street. The moment when a difficult problem
suddenly makes sense. These small things, and many others like them, make an ordinary day worth
living.

The Clockmaker's Apprentice

In a narrow shop at the end of Bell Street worked a clockmaker who had made clocks for forty
years. His hands were slow now, so he took an apprentice, a quiet boy named Peter who liked to
take things apart. "Anyone can take a clock apart," the old man told him on the first day. "The
art is in putting it back together so that it keeps good time." Peter learned to clean the tiny
wheels, to oil the pivots, to set the balance spring, and to listen for the steady beat that meant
a clock was healthy. After five years he built his own clock, with a moon that rose and set and a
little bird that sang at noon. The old clockmaker wound it, listened for a long time, and smiled.
"It keeps good time," he said.
)CORPUS";

bool is_ascii_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

std::string with_case(std::string word, int variant) {  // 0 lower, 1 Title, 2 UPPER
  for (size_t i = 0; i < word.size(); ++i) {
    const bool upper = variant == 2 || (variant == 1 && i == 0);
    word[i] = upper ? static_cast<char>(word[i] & ~0x20) : static_cast<char>(word[i] | 0x20);
  }
  return word;
}

}  // namespace

std::string_view tiny_corpus_prose() {
  return kProse;
}

std::string tiny_corpus() {
  std::set<std::string> words;  // sorted, so the index is deterministic
  for (size_t i = 0; i < kProse.size();) {
    size_t j = i;
    while (j < kProse.size() && is_ascii_letter(kProse[j])) ++j;
    if (j > i) words.insert(with_case(std::string(kProse.substr(i, j - i)), 0));
    i = j + 1;
  }
  std::string text(kProse);
  text += "\nIndex:";
  for (const std::string& w : words) {
    for (int variant = 0; variant < 3; ++variant) text += " " + with_case(w, variant);
  }
  text += "\nNumbers:";
  for (int n = 0; n < 1000; ++n) text += " " + std::to_string(n);
  text += "\n";
  return text;
}

}  // namespace troupe::model
