static int square(int s) { return s * s; }
static int triangle(int s) { return s * s / 2; }
int shape_area(int kind, int size) {
  switch (kind) {
  case 0: return square(size);
  case 1: return triangle(size);
  default: return 3 * size * size;
  }
}
