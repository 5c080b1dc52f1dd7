/* hello_gkc.c: the smallest complete libgkc program.
 *
 * Multiplies a 2x3 by a 3x2 matrix on gkcd, then sums the result.
 *   cc hello_gkc.c $(pkg-config --cflags --libs gkc) -o hello_gkc
 *   ./hello_gkc [SOCKET]
 */
#include <gkc.h>
#include <stdio.h>

int main(int argc, char **argv) {
  gkc_conn *c;
  if (gkc_connect(&c, argc > 1 ? argv[1] : NULL) != 0) {
    fprintf(stderr, "hello_gkc: %s\n", gkc_errmsg(c));
    gkc_close(c);
    return 1;
  }
  const float a[2 * 3] = {1, 2, 3,
                          4, 5, 6};
  const float b[3 * 2] = {7, 8,
                          9, 10,
                          11, 12};
  float out[2 * 2];
  gkc_info info;
  if (gkc_sgemm(c, 2, 2, 3, 1.0f, a, 0, b, 0, 0.0f, out, NULL, &info) != 0) {
    fprintf(stderr, "hello_gkc: sgemm: %s\n", gkc_errmsg(c));
    gkc_close(c);
    return 1;
  }
  printf("A*B = [[%g, %g], [%g, %g]]  (algo %s)\n", out[0], out[1], out[2], out[3], info.algo);
  double sum;
  if (gkc_reduce(c, out, 4, GKC_SUM, &sum, NULL, NULL) != 0) {
    fprintf(stderr, "hello_gkc: reduce: %s\n", gkc_errmsg(c));
    gkc_close(c);
    return 1;
  }
  printf("sum = %g\n", sum);
  gkc_close(c);
  return 0;
}
