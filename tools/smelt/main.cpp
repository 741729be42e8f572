#include <cstdio>
int main() {
  std::printf("smelt %s\n", SMELT_VERSION);
  return 0;
}
