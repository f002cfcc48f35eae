/*
 * cg -- MPI conjugate-gradient solver for the 2D/3D Poisson matrix (5-/7-point Laplacian, Dirichlet
 * boundary, scaled by h^2 so the diagonal is 2d) on an N^d grid, matrix-free.
 *
 * Distribution: row blocks of the lexicographic ordering, i.e. slabs of whole grid lines (2D) or
 * planes (3D) along the slowest dimension; slab sizes differ by at most one.  The SpMV needs one
 * line/plane from each neighbouring slab: halo_exchange() posts MPI_Irecv + MPI_Isend to the ranks
 * rank-1 and rank+1 (when they exist) and completes them with one MPI_Waitall.
 *
 * Manufactured problem: x* = prod sin(pi x_i) * (1 + x_0) (smooth, not an eigenvector); b = A x*
 * is computed with the same matrix-free operator, so CG must converge to x*.
 *
 * Per iteration: halo_exchange + spmv (q = A p), dot (p.q) -> MPI_Allreduce, axpys, dot (r.r) ->
 * MPI_Allreduce: two MPI_Allreduce of one double each.
 *
 * Usage: cg [-d 2|3] [-n N] [-i MAXITER] [-t TOL] [-q]
 *   -n  interior points per dimension (64)   -i  maximum iterations (500)
 *   -t  stop when |r|/|b| < TOL (1e-10; 0 runs exactly MAXITER iterations unless r becomes 0)
 *
 * Output (rank 0, stdout):
 *   perfcast-info <key> <value>
 *   perfcast-residual <iteration> <|r|/|b|>      after each iteration (not with -q)
 *   perfcast-result iterations <count>
 *   perfcast-result relres <|r|/|b|>
 *   perfcast-result error <|x - x*| / |x*|>       (2-norms)
 *   perfcast-timer <name> <seconds>               spmv | halo | dot | axpy | total, max over ranks
 *
 * MPI calls per rank: MPI_Barrier 1; one halo exchange (Irecv+Isend per existing neighbour, one
 * Waitall when a neighbour exists) to compute b and one per iteration; MPI_Allreduce 2 before the
 * loop (|b|^2 and r.r), 2 per iteration, 2 after it (errors); MPI_Reduce 1 (5 timers).
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

typedef struct {
    int d, n;          /* dimension, points per dimension */
    long plane;        /* points in one line (2D) / plane (3D) = n^(d-1) */
    int nz;            /* local planes */
    int z0;            /* global index of the first local plane */
    int lower, upper;  /* neighbour ranks or MPI_PROC_NULL */
    MPI_Comm comm;
} dist_t;

static void die(const char *msg)
{
    fprintf(stderr, "cg: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* vectors hold nz + 2 planes: plane 0 and nz + 1 are halos */
NOINLINE void halo_exchange(const dist_t *D, double *x)
{
    MPI_Request req[4];
    int nr = 0;
    long P = D->plane;
    if (D->lower != MPI_PROC_NULL)
        MPI_Irecv(x, (int)P, MPI_DOUBLE, D->lower, 1, D->comm, &req[nr++]);
    if (D->upper != MPI_PROC_NULL)
        MPI_Irecv(x + (D->nz + 1) * P, (int)P, MPI_DOUBLE, D->upper, 0, D->comm, &req[nr++]);
    if (D->lower != MPI_PROC_NULL)
        MPI_Isend(x + P, (int)P, MPI_DOUBLE, D->lower, 0, D->comm, &req[nr++]);
    if (D->upper != MPI_PROC_NULL)
        MPI_Isend(x + D->nz * P, (int)P, MPI_DOUBLE, D->upper, 1, D->comm, &req[nr++]);
    if (nr) MPI_Waitall(nr, req, MPI_STATUSES_IGNORE);
}

/* y = A x on the local planes (x's halos must be current; halos outside the domain are zero) */
NOINLINE void spmv(const dist_t *D, const double *restrict x, double *restrict y)
{
    const int n = D->n, d = D->d;
    const long P = D->plane;
    for (int z = 1; z <= D->nz; z++) {
        if (d == 2) {
            const double *xc = x + z * P;
            double *yc = y + z * P;
            for (int i = 0; i < n; i++) {
                double v = 4.0 * xc[i] - xc[i - P] - xc[i + P];
                if (i > 0) v -= xc[i - 1];
                if (i < n - 1) v -= xc[i + 1];
                yc[i] = v;
            }
        } else {
            for (int j = 0; j < n; j++) {
                const double *xc = x + z * P + (long)j * n;
                double *yc = y + z * P + (long)j * n;
                for (int i = 0; i < n; i++) {
                    double v = 6.0 * xc[i] - xc[i - P] - xc[i + P];
                    if (i > 0) v -= xc[i - 1];
                    if (i < n - 1) v -= xc[i + 1];
                    if (j > 0) v -= xc[i - n];
                    if (j < n - 1) v -= xc[i + n];
                    yc[i] = v;
                }
            }
        }
    }
}

NOINLINE double dot(const dist_t *D, const double *a, const double *b)
{
    double s = 0.0, g = 0.0;
    long lo = D->plane, hi = (D->nz + 1) * D->plane;
    for (long i = lo; i < hi; i++) s += a[i] * b[i];
    MPI_Allreduce(&s, &g, 1, MPI_DOUBLE, MPI_SUM, D->comm);
    return g;
}

/* y = y + a x over the local planes */
NOINLINE void axpy(const dist_t *D, double a, const double *restrict x, double *restrict y)
{
    long lo = D->plane, hi = (D->nz + 1) * D->plane;
    for (long i = lo; i < hi; i++) y[i] += a * x[i];
}

/* p = r + beta p */
NOINLINE void xpby(const dist_t *D, const double *restrict r, double beta, double *restrict p)
{
    long lo = D->plane, hi = (D->nz + 1) * D->plane;
    for (long i = lo; i < hi; i++) p[i] = r[i] + beta * p[i];
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, opt, quiet = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int d = 2, n = 64, maxit = 500;
    double tol = 1e-10;
    while ((opt = getopt(argc, argv, "d:n:i:t:q")) != -1) {
        switch (opt) {
        case 'd': d = atoi(optarg); break;
        case 'n': n = atoi(optarg); break;
        case 'i': maxit = atoi(optarg); break;
        case 't': tol = atof(optarg); break;
        case 'q': quiet = 1; break;
        default:
            if (rank == 0) fprintf(stderr, "usage: cg [-d 2|3] [-n N] [-i MAXITER] [-t TOL] [-q]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (d != 2 && d != 3) die("-d must be 2 or 3");
    if (n < size) die("need at least one plane per rank (N >= ranks)");
    if (maxit < 0 || tol < 0) die("bad argument");

    dist_t D = {.d = d, .n = n, .comm = MPI_COMM_WORLD};
    D.plane = d == 2 ? n : (long)n * n;
    int q = n / size, rem = n % size;
    D.nz = q + (rank < rem);
    D.z0 = rank * q + (rank < rem ? rank : rem);
    D.lower = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    D.upper = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;

    long len = (D.nz + 2) * D.plane;
    double *x = calloc(len, sizeof(double)), *xs = calloc(len, sizeof(double));
    double *b = calloc(len, sizeof(double)), *r = calloc(len, sizeof(double));
    double *p = calloc(len, sizeof(double)), *qv = calloc(len, sizeof(double));
    if (!x || !xs || !b || !r || !p || !qv) die("out of memory");
    const double h = 1.0 / (n + 1);
    for (int z = 1; z <= D.nz; z++)
        for (long k = 0; k < D.plane; k++) {
            int i = (int)(k % n), j = (int)(k / n);
            double X = h * (i + 1), Y = h * (d == 2 ? D.z0 + z : j + 1), Z = h * (D.z0 + z);
            double v = sin(M_PI * X) * sin(M_PI * Y) * (1.0 + X);
            if (d == 3) v *= sin(M_PI * Z);
            xs[z * D.plane + k] = v;
        }
    halo_exchange(&D, xs);
    spmv(&D, xs, b);

    if (rank == 0)
        printf("perfcast-info ranks %d\nperfcast-info dim %d\nperfcast-info grid %d\n"
               "perfcast-info maxiter %d\nperfcast-info tol %g\n", size, d, n, maxit, tol);

    double t_spmv = 0, t_halo = 0, t_dot = 0, t_axpy = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    /* x = 0, r = b, p = r */
    memcpy(r, b, len * sizeof(double));
    memcpy(p, b, len * sizeof(double));
    double bb = dot(&D, b, b);
    double rr = dot(&D, r, r);
    double bnorm = sqrt(bb);
    int it = 0;
    while (it < maxit && rr > 0.0 && sqrt(rr) / bnorm >= tol) {
        double t1 = MPI_Wtime();
        halo_exchange(&D, p);
        double t2 = MPI_Wtime();
        spmv(&D, p, qv);
        double t3 = MPI_Wtime();
        double pq = dot(&D, p, qv);
        double t4 = MPI_Wtime();
        double alpha = rr / pq;
        axpy(&D, alpha, p, x);
        axpy(&D, -alpha, qv, r);
        double t5 = MPI_Wtime();
        double rr_new = dot(&D, r, r);
        double t6 = MPI_Wtime();
        xpby(&D, r, rr_new / rr, p);
        double t7 = MPI_Wtime();
        rr = rr_new;
        it++;
        t_halo += t2 - t1;
        t_spmv += t3 - t2;
        t_dot += (t4 - t3) + (t6 - t5);
        t_axpy += (t5 - t4) + (t7 - t6);
        if (rank == 0 && !quiet) printf("perfcast-residual %d %.17g\n", it, sqrt(rr) / bnorm);
    }
    double t_total = MPI_Wtime() - t0;

    for (long i = 0; i < len; i++) qv[i] = x[i] - xs[i];
    double ee = dot(&D, qv, qv), xx = dot(&D, xs, xs);
    double tl[5] = {t_spmv, t_halo, t_dot, t_axpy, t_total}, tm[5];
    MPI_Reduce(tl, tm, 5, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("perfcast-result iterations %d\nperfcast-result relres %.17g\nperfcast-result error %.17g\n",
               it, sqrt(rr) / bnorm, sqrt(ee / xx));
        printf("perfcast-timer spmv %.9f\nperfcast-timer halo %.9f\nperfcast-timer dot %.9f\n"
               "perfcast-timer axpy %.9f\nperfcast-timer total %.9f\n", tm[0], tm[1], tm[2], tm[3], tm[4]);
    }
    free(x); free(xs); free(b); free(r); free(p); free(qv);
    MPI_Finalize();
    return 0;
}
