/* bench_mpi.c: the two MPI figures the CG scaling model needs (docs/CLUSTER.md).
 *
 *   mpirun -np 2 bench_mpi [--iters N] [--json | --csv]
 *
 * - Allreduce latency: MPI_Allreduce of 2 doubles (CG's payload plus the
 *   error slot gkc-mpi adds), over all ranks, median of N.
 * - Halo exchange: ranks 0 and 1 swap B bytes each way (MPI_Sendrecv), for B
 *   from 4 bytes to 4 MiB: latency and bandwidth, median of N.
 * Rank 0 prints a Markdown table, or with --json one JSON object, with
 * --csv one CSV row per figure (test,ranks,bytes,median_us,mb_per_s).  No
 * gkcd involved.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_csv.h"

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp_d);
  return t[n / 2];
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, iters = 2000, json = 0, csv_on = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
      iters = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--json") && !csv_on) {
      json = 1;
    } else if (!strcmp(argv[i], "--csv") && !json) {
      csv_on = 1;
    } else {
      if (rank == 0)
        fprintf(!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") ? stdout : stderr,
                "Usage: mpirun -np P bench_mpi [--iters N] [--json | --csv]\n"
                "Times MPI_Allreduce of 2 doubles over P ranks and a halo swap of 4 B to\n"
                "4 MiB between ranks 0 and 1 (medians of N, default 2000).\n"
                "  --json   one JSON object on stdout instead of the tables\n"
                "  --csv    CSV on stdout instead of the tables: a header row, then one row\n"
                "           per figure (test,ranks,bytes,median_us,mb_per_s)\n");
      MPI_Finalize();
      return !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h") ? 0 : 2;
    }
  }
  if (iters < 10) iters = 10;
  double *t = malloc((size_t)iters * sizeof *t);
  double v[2] = {1, 0};
  for (int i = 0; i < iters; i++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    t[i] = MPI_Wtime() - t0;
  }
  double ar = median(t, iters);
  double tmax;
  MPI_Reduce(&ar, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  bench_csv csv = {0};
  if (rank == 0 && csv_on && bench_csv_open(&csv, "-", "test,ranks,bytes,median_us,mb_per_s") != 0)
    MPI_Abort(MPI_COMM_WORLD, 1);
  if (rank == 0 && json) {
    printf("{\"ranks\": %d, \"iters\": %d, \"allreduce_2_doubles_us\": %.3f, \"halo\": [", size, iters,
           tmax * 1e6);
  } else if (rank == 0 && csv_on) {
    bench_csv_str(&csv, "allreduce");
    bench_csv_num(&csv, "%d", size);
    bench_csv_num(&csv, "%d", 16);
    bench_csv_num(&csv, "%.3f", tmax * 1e6);
    bench_csv_str(&csv, "");
    bench_csv_end(&csv);
  } else if (rank == 0) {
    printf("| figure | value |\n|---|---:|\n");
    printf("| MPI_Allreduce, 2 doubles, %d ranks (median, slowest rank) | %.2f us |\n", size,
           tmax * 1e6);
  }
  if (size >= 2) {
    size_t maxb = (size_t)4 << 20;
    char *sb = calloc(maxb, 1), *rb = calloc(maxb, 1);
    if (rank == 0 && !json && !csv_on) printf("\n| halo swap, bytes each way | latency (median) | bandwidth each way |\n|---:|---:|---:|\n");
    for (size_t b = 4; b <= maxb; b *= 8) {
      int n = b >= ((size_t)1 << 20) ? iters / 20 + 5 : iters;
      for (int i = 0; i < n; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        if (rank < 2)
          MPI_Sendrecv(sb, (int)b, MPI_BYTE, 1 - rank, 0, rb, (int)b, MPI_BYTE, 1 - rank, 0,
                       MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        t[i] = MPI_Wtime() - t0;
      }
      double m = median(t, n);
      if (rank == 0 && json) {
        printf("%s\n  {\"bytes\": %zu, \"median_us\": %.3f, \"mb_per_s\": %.1f}", b == 4 ? "" : ",", b,
               m * 1e6, (double)b / m / 1e6);
      } else if (rank == 0 && csv_on) {
        bench_csv_str(&csv, "halo");
        bench_csv_num(&csv, "%d", 2);
        bench_csv_num(&csv, "%zu", b);
        bench_csv_num(&csv, "%.3f", m * 1e6);
        bench_csv_num(&csv, "%.1f", (double)b / m / 1e6);
        bench_csv_end(&csv);
      } else if (rank == 0) {
        printf("| %zu | %.2f us | %.1f MB/s |\n", b, m * 1e6, (double)b / m / 1e6);
      }
    }
    free(sb), free(rb);
  }
  if (rank == 0 && json) printf("\n]}\n");
  int bad = rank == 0 && bench_csv_close(&csv) != 0;
  free(t);
  MPI_Finalize();
  if (bad) return 1;
  return 0;
}
