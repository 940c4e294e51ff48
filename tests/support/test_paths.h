// Where the suite finds its data, the troupe binary and the UCX peer program.
//
// The build tree's absolute paths are compiled into test_paths.cpp alone: were they a
// definition on every test object, each checkout (a worktree, a CI clone) would compile
// the whole suite afresh, since ccache keys on the command line.
#pragma once

namespace troupe::test {

const char* test_data_dir();    // tests/data of this checkout
const char* troupe_binary();    // the troupe executable built with the suite
const char* ucx_peer_binary();  // troupe_ucx_peer, or "" where UCX is not built

}  // namespace troupe::test

#define TROUPE_TEST_DATA (::troupe::test::test_data_dir())
#define TROUPE_BINARY (::troupe::test::troupe_binary())
#define TROUPE_UCX_PEER (::troupe::test::ucx_peer_binary())
