// Reads the markdown tables a troupe benchmark prints: every line starting with "| " is
// a row, split into trimmed cells (separator lines "|---|" are skipped); consecutive
// rows form one table.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace troupe::testing {

// "| a | b |" -> {"a", "b"}
inline std::vector<std::string> table_cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line.substr(1));
  std::string cell;
  while (std::getline(ss, cell, '|')) {
    const auto b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
    out.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
  }
  return out;
}

// Every table row of `out`, header rows included, in order.
inline std::vector<std::vector<std::string>> table_rows(const std::string& out) {
  std::vector<std::vector<std::string>> rows;
  std::stringstream ss(out);
  std::string line;
  while (std::getline(ss, line))
    if (line.rfind("| ", 0) == 0) rows.push_back(table_cells(line));
  return rows;
}

// The tables of `out` in order, each its rows (header first).
inline std::vector<std::vector<std::vector<std::string>>> markdown_tables(const std::string& out) {
  std::vector<std::vector<std::vector<std::string>>> tables;
  std::stringstream ss(out);
  std::string line;
  bool in_table = false;
  while (std::getline(ss, line)) {
    const bool row = line.rfind("| ", 0) == 0, separator = line.rfind("|-", 0) == 0;
    if (row && !in_table) tables.emplace_back();
    if (row) tables.back().push_back(table_cells(line));
    in_table = row || (separator && in_table);
  }
  return tables;
}

}  // namespace troupe::testing
