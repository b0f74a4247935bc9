// A stand-in for a trainer stuck in a collective: it reports one step, then
// blocks for ever inside tpud_test_all_reduce_wait(), whose name an incident
// bundle's stacks (eu-stack) must show. Built without optimisation so the
// frame is there; extern "C" so the symbol is the plain name.
#include <unistd.h>

#include <cstdio>

extern "C" __attribute__((noinline)) void tpud_test_all_reduce_wait() {
  for (;;) pause();
}

int main() {
  std::printf("step=1 loss=0.5\n");
  std::fflush(stdout);
  tpud_test_all_reduce_wait();
  return 0;
}
