// tpuctl's entry point; everything else lives in client/ (see tpuctl.h).
#include "client/tpuctl.h"

int main(int argc, char** argv) { return tpud::client::RunTpuctl(argc, argv); }
