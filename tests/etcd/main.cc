// The etcd tests' Catch2 main (tests/etcd/CMakeLists.txt).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
