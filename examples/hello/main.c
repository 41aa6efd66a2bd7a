/* A small ThinLTO program for thindist's demo: four modules, one of them in
   a static archive, with calls across modules for the backends to inline. */
#include <stdio.h>

int shape_area(int kind, int size);
int checksum(const char *s);
const char *greeting(void);

int main(void) {
  int total = 0;
  for (int kind = 0; kind < 3; kind++)
    total += shape_area(kind, 7);
  printf("%s area=%d checksum=%d\n", greeting(), total, checksum(greeting()));
  return 0;
}
