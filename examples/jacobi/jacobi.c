/*
 * jacobi -- MPI 2D/3D Jacobi solver for the Poisson equation  -lap(u) = f  on the unit square/cube
 * with u = 0 on the boundary, on an N^d grid of interior points (h = 1/(N+1)).
 *
 * Decomposition: a Cartesian process grid from MPI_Dims_create + MPI_Cart_create (non-periodic,
 * reorder = 0); each rank owns a block of the global grid (block sizes differ by at most one point).
 *
 * Per iteration:
 *   halo_exchange()  one face per existing neighbour (2 per dimension at most): every face is
 *                    packed into a contiguous buffer and exchanged as MPI_DOUBLEs, by default with
 *                    MPI_Irecv + MPI_Isend for all faces followed by ONE MPI_Waitall (-m isend), or
 *                    with one MPI_Sendrecv per direction (-m sendrecv; faces towards MPI_PROC_NULL
 *                    are skipped in both modes, so no message goes to a missing neighbour);
 *   compute_sweep()  the Jacobi update; it also yields the local sum of squares of the residual
 *                    r = f + lap_h(u) of the iterate it starts from (r = 2d/h^2 (u_new - u));
 *   reduce_residual() every k-th iteration (-k): MPI_Allreduce(SUM) of one double.
 *
 * Grid spacing h = 1/(N_0 + 1) in every dimension (N_a points along dimension a; the grid need not be
 * cubic under weak scaling).  The right-hand side is the discrete eigenfunction f = lambda * s with
 * s = prod_a sin(pi i_a / (N_a + 1)) and lambda = sum_a (2 - 2 cos(pi / (N_a + 1))) / h^2, so the
 * discrete solution is exactly s and, starting from u = 0, iterate k is u_k = (1 - c^k) s with
 * c = sum_a cos(pi / (N_a + 1)) / d: the residual 2-norm of iterate k is lambda c^k |s| and the
 * error 2-norm after k iterations is c^k |s| (2-norms over the grid points) -- the tests check both.
 *
 * Usage: jacobi [-d 2|3] [-n N | -w W] [-i ITERS] [-k K] [-m isend|sendrecv] [-q]
 *   -d  dimension (2)            -n  global interior points per dimension (64)
 *   -w  weak scaling: W^d points per rank; the global grid per dimension is W * dims[i]
 *   -i  iterations (100)         -k  residual Allreduce every K iterations (1)
 *   -q  do not print residual lines
 *
 * Output (rank 0, stdout), one item per line, fields separated by one space:
 *   perfcast-info <key> <value>            configuration (dims, grid, ranks, ...)
 *   perfcast-residual <iteration> <norm>   global residual 2-norm of iterate <iteration>
 *                                          (printed when the Allreduce happened: iteration+1 % K == 0)
 *   perfcast-result error <norm>           2-norm of u - s after the last iteration
 *   perfcast-timer <name> <seconds>        compute | halo | reduce | total, max over ranks
 *
 * MPI calls per rank (the PMPI tests derive their expectations from this list):
 *   MPI_Barrier 1 (before the timed loop); per iteration in isend mode one MPI_Irecv and one
 *   MPI_Isend per existing neighbour and one MPI_Waitall (when the rank has a neighbour), in
 *   sendrecv mode one MPI_Sendrecv per direction with a neighbour on either side (send and receive
 *   towards a missing neighbour become MPI_PROC_NULL); MPI_Allreduce floor(ITERS/K) times with one
 *   double, plus once with one double for the final error; MPI_Reduce once with 4 doubles (timers).
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXD 3
#define NOINLINE __attribute__((noinline))

typedef struct {
    int d;                 /* dimension */
    int gn[MAXD];          /* global interior points per dimension */
    int ln[MAXD];          /* local interior points per dimension */
    int off[MAXD];         /* global index of the first local point */
    int ext[MAXD];         /* local extent with halo: ln + 2 (1 for unused dimensions) */
    long stride[MAXD];     /* array strides in elements */
    long nloc;             /* elements in the local array incl. halo */
    int nb[MAXD][2];       /* neighbour ranks (MPI_PROC_NULL if none): [dim][0 = lower, 1 = upper] */
    MPI_Comm cart;
    double *sendbuf[MAXD][2], *recvbuf[MAXD][2];
    long facelen[MAXD];
    int use_sendrecv;
} grid_t;

static void die(const char *msg)
{
    fprintf(stderr, "jacobi: %s\n", msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static long idx(const grid_t *g, const int *i)
{
    long k = 0;
    for (int a = 0; a < g->d; a++) k += (long)i[a] * g->stride[a];
    return k;
}

/* Copy the face of the interior next to side s (0 lower, 1 upper) of dimension a into buf, or
 * (unpack) buf into the halo layer on that side. */
static void face_copy(const grid_t *g, double *u, int a, int s, double *buf, int unpack)
{
    int lo[MAXD], hi[MAXD], i[MAXD];
    for (int b = 0; b < g->d; b++) { lo[b] = 1; hi[b] = g->ln[b]; }
    int plane = unpack ? (s ? g->ln[a] + 1 : 0) : (s ? g->ln[a] : 1);
    lo[a] = hi[a] = plane;
    long n = 0;
    for (int b = g->d; b < MAXD; b++) { lo[b] = hi[b] = 0; }
    for (i[2] = lo[2]; i[2] <= hi[2]; i[2]++)
        for (i[1] = lo[1]; i[1] <= hi[1]; i[1]++)
            for (i[0] = lo[0]; i[0] <= hi[0]; i[0]++) {
                long k = idx(g, i);
                if (unpack) u[k] = buf[n++]; else buf[n++] = u[k];
            }
}

NOINLINE void halo_exchange(grid_t *g, double *u)
{
    MPI_Request req[4 * MAXD];
    int nreq = 0;
    for (int a = 0; a < g->d; a++)
        for (int s = 0; s < 2; s++)
            if (g->nb[a][s] != MPI_PROC_NULL) face_copy(g, u, a, s, g->sendbuf[a][s], 0);
    if (g->use_sendrecv) {
        for (int a = 0; a < g->d; a++) {
            for (int s = 0; s < 2; s++) {
                /* send to side s, receive from the opposite side; tag = direction */
                int to = g->nb[a][s], from = g->nb[a][1 - s];
                if (to == MPI_PROC_NULL && from == MPI_PROC_NULL) continue;
                MPI_Sendrecv(g->sendbuf[a][s], (int)g->facelen[a], MPI_DOUBLE, to, 2 * a + s,
                             g->recvbuf[a][1 - s], (int)g->facelen[a], MPI_DOUBLE, from, 2 * a + s,
                             g->cart, MPI_STATUS_IGNORE);
            }
        }
    } else {
        for (int a = 0; a < g->d; a++)
            for (int s = 0; s < 2; s++)
                if (g->nb[a][s] != MPI_PROC_NULL)
                    /* the message from the neighbour on side s was sent towards side 1-s */
                    MPI_Irecv(g->recvbuf[a][s], (int)g->facelen[a], MPI_DOUBLE, g->nb[a][s],
                              2 * a + (1 - s), g->cart, &req[nreq++]);
        for (int a = 0; a < g->d; a++)
            for (int s = 0; s < 2; s++)
                if (g->nb[a][s] != MPI_PROC_NULL)
                    MPI_Isend(g->sendbuf[a][s], (int)g->facelen[a], MPI_DOUBLE, g->nb[a][s], 2 * a + s,
                              g->cart, &req[nreq++]);
        if (nreq) MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
    }
    for (int a = 0; a < g->d; a++)
        for (int s = 0; s < 2; s++)
            if (g->nb[a][s] != MPI_PROC_NULL) face_copy(g, u, a, s, g->recvbuf[a][s], 1);
}

/* One Jacobi sweep unew = (sum of neighbours + h^2 f) / 2d over the interior; returns the local
 * sum of squares of the residual of u. */
NOINLINE double compute_sweep(const grid_t *g, const double *restrict u, double *restrict unew,
                              const double *restrict f, double h2)
{
    const int d = g->d;
    const double inv = 1.0 / (2 * d), rscale = (2.0 * d) / h2;
    double rr = 0.0;
    const long s0 = g->stride[0], s1 = g->stride[1], s2 = d > 2 ? g->stride[2] : 0;
    int n2 = d > 2 ? g->ln[2] : 1;
    for (int k = 1; k <= n2; k++) {
        for (int j = 1; j <= g->ln[1]; j++) {
            long base = (d > 2 ? k * s2 : 0) + j * s1;
            for (int i = 1; i <= g->ln[0]; i++) {
                long c = base + i * s0;
                double sum = u[c - s0] + u[c + s0] + u[c - s1] + u[c + s1];
                if (d > 2) sum += u[c - s2] + u[c + s2];
                double v = (sum + h2 * f[c]) * inv;
                double r = (v - u[c]) * rscale;
                rr += r * r;
                unew[c] = v;
            }
        }
    }
    return rr;
}

NOINLINE double reduce_residual(const grid_t *g, double local)
{
    double global = 0.0;
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, g->cart);
    return global;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    int d = 2, n = 64, w = 0, iters = 100, k = 1, quiet = 0, use_sendrecv = 0, opt;
    while ((opt = getopt(argc, argv, "d:n:w:i:k:m:q")) != -1) {
        switch (opt) {
        case 'd': d = atoi(optarg); break;
        case 'n': n = atoi(optarg); break;
        case 'w': w = atoi(optarg); break;
        case 'i': iters = atoi(optarg); break;
        case 'k': k = atoi(optarg); break;
        case 'q': quiet = 1; break;
        case 'm':
            if (!strcmp(optarg, "sendrecv")) use_sendrecv = 1;
            else if (!strcmp(optarg, "isend")) use_sendrecv = 0;
            else die("-m takes isend or sendrecv");
            break;
        default:
            if (rank == 0)
                fprintf(stderr, "usage: jacobi [-d 2|3] [-n N | -w W] [-i ITERS] [-k K] [-m isend|sendrecv] [-q]\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (d != 2 && d != 3) die("-d must be 2 or 3");
    if (iters < 0 || k < 1 || n < 1 || w < 0) die("bad argument (need ITERS >= 0, K >= 1, N >= 1)");

    grid_t g;
    memset(&g, 0, sizeof g);
    g.d = d;
    g.use_sendrecv = use_sendrecv;
    int dims[MAXD] = {0, 0, 0}, periods[MAXD] = {0, 0, 0}, coords[MAXD] = {0, 0, 0};
    MPI_Dims_create(size, d, dims);
    MPI_Cart_create(MPI_COMM_WORLD, d, dims, periods, 0, &g.cart);
    MPI_Cart_coords(g.cart, rank, d, coords);
    for (int a = 0; a < d; a++) {
        g.gn[a] = w ? w * dims[a] : n;
        if (g.gn[a] < dims[a]) die("grid smaller than the process grid");
        int q = g.gn[a] / dims[a], r = g.gn[a] % dims[a];
        g.ln[a] = q + (coords[a] < r);
        g.off[a] = coords[a] * q + (coords[a] < r ? coords[a] : r);
        MPI_Cart_shift(g.cart, a, 1, &g.nb[a][0], &g.nb[a][1]);
    }
    /* dimension 0 varies fastest */
    long st = 1;
    for (int a = 0; a < MAXD; a++) {
        g.ext[a] = a < d ? g.ln[a] + 2 : 1;
        g.stride[a] = st;
        st *= g.ext[a];
    }
    g.nloc = st;
    for (int a = 0; a < d; a++) {
        long fl = 1;
        for (int b = 0; b < d; b++) if (b != a) fl *= g.ln[b];
        g.facelen[a] = fl;
        for (int s = 0; s < 2; s++) {
            g.sendbuf[a][s] = malloc(fl * sizeof(double));
            g.recvbuf[a][s] = malloc(fl * sizeof(double));
            if (!g.sendbuf[a][s] || !g.recvbuf[a][s]) die("out of memory");
        }
    }
    double *u = calloc(g.nloc, sizeof(double)), *unew = calloc(g.nloc, sizeof(double));
    double *f = calloc(g.nloc, sizeof(double)), *sol = calloc(g.nloc, sizeof(double));
    if (!u || !unew || !f || !sol) die("out of memory");

    /* grid spacing h = 1/(N_0+1) in every dimension (the domain is [0, (N_a+1) h] along a) */
    const double h = 1.0 / (g.gn[0] + 1), h2 = h * h;
    double lambda = 0.0;
    for (int a = 0; a < d; a++) lambda += (2.0 - 2.0 * cos(M_PI / (g.gn[a] + 1))) / h2;
    {
        int i[MAXD] = {0, 0, 0};
        int n2 = d > 2 ? g.ln[2] : 1;
        for (i[2] = d > 2 ? 1 : 0; i[2] <= (d > 2 ? n2 : 0); i[2]++)
            for (i[1] = 1; i[1] <= g.ln[1]; i[1]++)
                for (i[0] = 1; i[0] <= g.ln[0]; i[0]++) {
                    double s = 1.0;
                    for (int a = 0; a < d; a++) s *= sin(M_PI * (g.off[a] + i[a]) / (g.gn[a] + 1));
                    long c = idx(&g, i);
                    sol[c] = s;
                    f[c] = lambda * s;
                }
    }

    if (rank == 0) {
        printf("perfcast-info ranks %d\nperfcast-info dim %d\nperfcast-info grid", size, d);
        for (int a = 0; a < d; a++) printf(" %d", g.gn[a]);
        printf("\nperfcast-info procs");
        for (int a = 0; a < d; a++) printf(" %d", dims[a]);
        printf("\nperfcast-info iterations %d\nperfcast-info reduce_every %d\nperfcast-info halo %s\n",
               iters, k, use_sendrecv ? "sendrecv" : "isend");
    }

    double t_compute = 0, t_halo = 0, t_reduce = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int it = 0; it < iters; it++) {
        double a = MPI_Wtime();
        halo_exchange(&g, u);
        double b = MPI_Wtime();
        double rr = compute_sweep(&g, u, unew, f, h2);
        double c = MPI_Wtime();
        t_halo += b - a;
        t_compute += c - b;
        double *tmp = u; u = unew; unew = tmp;
        if ((it + 1) % k == 0) {
            double grr = reduce_residual(&g, rr);
            t_reduce += MPI_Wtime() - c;
            if (rank == 0 && !quiet) printf("perfcast-residual %d %.17g\n", it, sqrt(grr));
        }
    }
    double t_total = MPI_Wtime() - t0;

    double err = 0.0, gerr = 0.0;
    {
        int i[MAXD] = {0, 0, 0};
        int n2 = d > 2 ? g.ln[2] : 1;
        for (i[2] = d > 2 ? 1 : 0; i[2] <= (d > 2 ? n2 : 0); i[2]++)
            for (i[1] = 1; i[1] <= g.ln[1]; i[1]++)
                for (i[0] = 1; i[0] <= g.ln[0]; i[0]++) {
                    long c = idx(&g, i);
                    err += (u[c] - sol[c]) * (u[c] - sol[c]);
                }
    }
    MPI_Allreduce(&err, &gerr, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double tl[4] = {t_compute, t_halo, t_reduce, t_total}, tm[4];
    MPI_Reduce(tl, tm, 4, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("perfcast-result error %.17g\n", sqrt(gerr));
        printf("perfcast-timer compute %.9f\nperfcast-timer halo %.9f\nperfcast-timer reduce %.9f\n"
               "perfcast-timer total %.9f\n", tm[0], tm[1], tm[2], tm[3]);
    }
    for (int a = 0; a < d; a++)
        for (int s = 0; s < 2; s++) { free(g.sendbuf[a][s]); free(g.recvbuf[a][s]); }
    free(u); free(unew); free(f); free(sol);
    MPI_Comm_free(&g.cart);
    MPI_Finalize();
    return 0;
}
