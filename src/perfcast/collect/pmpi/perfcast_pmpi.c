/*
 * perfcast_pmpi -- PMPI interposition library: per rank and per MPI routine, the number of calls,
 * bytes sent and received, time spent and a log2 message-size histogram, plus per-peer message and
 * byte counts for point-to-point traffic.  Build: mpicc -O2 -fPIC -shared -o libperfcast_pmpi.so
 * perfcast_pmpi.c; use: LD_PRELOAD=libperfcast_pmpi.so PERFCAST_PMPI_DIR=<dir> (perfcast.collect.pmpi
 * does both).  At MPI_Finalize every rank writes <dir>/pmpi.rank<5-digit world rank>.json (written to
 * a temporary name and renamed into place).  Without PERFCAST_PMPI_DIR nothing is written.
 *
 * What is counted (all per calling rank):
 *   calls       calls of the routine made by the application (MPI calls made from inside another
 *               intercepted call are not counted again);
 *   time        seconds inside the routine (TSC ticks calibrated against CLOCK_MONOTONIC where the
 *               kernel clocksource is tsc, CLOCK_MONOTONIC otherwise; "clock" in the file says which);
 *   bytes_sent / bytes_recv
 *     point-to-point sends (Send, Bsend, Ssend, Rsend, Isend, ... and persistent sends at each
 *               MPI_Start): count * type size; towards MPI_PROC_NULL: 0;
 *     receives  (Recv, Sendrecv, Sendrecv_replace, Mrecv): the size of the message actually
 *               received (from the status); Irecv/Imrecv/Recv_init requests: attributed to the
 *               posting routine when the request completes in a wait/test (actual size, source from
 *               the status; a cancelled receive counts 0);
 *     collectives: what this rank supplies and what it gets according to the buffer arguments
 *               (not the traffic of the algorithm the library chose), p = size of the (remote)
 *               group:  Bcast root sent count*ts, others recv count*ts;  Reduce all sent count*ts,
 *               root also recv count*ts;  Allreduce/Scan/Exscan sent = recv = count*ts;
 *               Gather(v) sent sendcount*sts, root recv p*recvcount*rts (sum of recvcounts);
 *               Scatter(v) root sent p*sendcount*sts (sum), all recv recvcount*rts;
 *               Allgather(v) sent sendcount*sts, recv p*recvcount*rts (sum);
 *               Alltoall(v,w) sent/recv the sums over all peers;  Reduce_scatter sent
 *               sum(recvcounts)*ts, recv recvcounts[rank]*ts;  Reduce_scatter_block sent
 *               p*recvcount*ts, recv recvcount*ts;  Barrier 0.  MPI_IN_PLACE: the in-place part
 *               counts as if it had been passed separately.  Non-blocking collectives count the
 *               same at the call that starts them;
 *     waits, tests and probes move no data of their own: bytes 0 (their time is the waiting time);
 *   hist        calls by message size, buckets b = 0 for 0 bytes and b >= 1 for sizes in
 *               [2^(b-1), 2^b); a point-to-point message contributes its size, a collective call
 *               max(bytes_sent, bytes_recv); waits/tests/probes have no histogram;
 *   peers       per world rank: messages and bytes sent to it and received from it by
 *               point-to-point routines (communicator ranks are translated to MPI_COMM_WORLD).
 *   time block  init = duration of MPI_Init(_thread); region = MPI_Init return .. MPI_Finalize entry;
 *               mpi = time in intercepted routines within the region; app = region - mpi.
 *   cart        the dims and periods of each MPI_Cart_create call that succeeded (the first CART_MAX;
 *               C binding only), with the size of the old communicator's group: a code's process
 *               grid, so that message counts can be modelled in it (perfcast.fit.grid).
 *
 * Bindings: the C entry points MPI_*, and for the Fortran bindings (Open MPI's mpif.h / "use mpi"
 * layer calls PMPI_* directly, so C wrappers alone do not see Fortran calls) mpi_xxx, mpi_xxx_,
 * mpi_xxx__, MPI_XXX and Open MPI's ompi_xxx_f (called by the mpi_f08 module) for the routines
 * listed in FORTRAN below; they call the library's pmpi_xxx_ and account like the C wrappers.
 *
 * Overhead: fixed arrays indexed by routine id; no allocation in the call path except the first
 * use of a new communicator for point-to-point (its rank translation table, kept for the run) and
 * wait/test calls on more than PERFCAST_SCRATCH requests with MPI_STATUSES_IGNORE.
 * Threads: counters are shared and not atomic; under MPI_THREAD_MULTIPLE all bookkeeping takes a
 * mutex (correct, slower); with lower thread levels the application may call MPI from one thread at
 * a time, which is exactly what the unlocked bookkeeping needs.
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PERFCAST_PMPI_VERSION 1
#define NBUCKET 65
#define PERFCAST_SCRATCH 256
#define REQ_BITS 15
#define REQ_SLOTS (1u << REQ_BITS)
#define COMM_SLOTS 64
#define CART_MAX 8
#define CART_DIMS 8

/* ---- routine table ------------------------------------------------------------------------- */
#define ROUTINES(X)                                                                                    \
    X(Init) X(Init_thread) X(Finalize)                                                                 \
    X(Send) X(Bsend) X(Ssend) X(Rsend) X(Recv) X(Sendrecv) X(Sendrecv_replace)                         \
    X(Isend) X(Ibsend) X(Issend) X(Irsend) X(Irecv)                                                    \
    X(Send_init) X(Bsend_init) X(Ssend_init) X(Rsend_init) X(Recv_init) X(Start) X(Startall)           \
    X(Request_free) X(Cancel)                                                                          \
    X(Wait) X(Waitall) X(Waitany) X(Waitsome) X(Test) X(Testall) X(Testany) X(Testsome)                \
    X(Probe) X(Iprobe) X(Mprobe) X(Improbe) X(Mrecv) X(Imrecv)                                         \
    X(Barrier) X(Bcast) X(Reduce) X(Allreduce) X(Gather) X(Gatherv) X(Scatter) X(Scatterv)             \
    X(Allgather) X(Allgatherv) X(Alltoall) X(Alltoallv) X(Alltoallw) X(Reduce_scatter)                 \
    X(Reduce_scatter_block) X(Scan) X(Exscan)                                                          \
    X(Ibarrier) X(Ibcast) X(Ireduce) X(Iallreduce) X(Igather) X(Igatherv) X(Iscatter) X(Iscatterv)     \
    X(Iallgather) X(Iallgatherv) X(Ialltoall) X(Ialltoallv) X(Ialltoallw) X(Ireduce_scatter)           \
    X(Ireduce_scatter_block) X(Iscan) X(Iexscan)

#define X_ENUM(n) R_##n,
enum { ROUTINES(X_ENUM) R_COUNT };
#define X_NAME(n) "MPI_" #n,
static const char *const routine_name[R_COUNT] = {ROUTINES(X_NAME)};

typedef struct {
    uint64_t calls, bytes_sent, bytes_recv;
    uint64_t ticks; /* time in ticks of tick() */
    uint64_t hist[NBUCKET];
} stat_t;

static stat_t S[R_COUNT];

/* per-peer point-to-point totals (world ranks), allocated at MPI_Init */
static uint64_t *peer_sent_msgs, *peer_sent_bytes, *peer_recv_msgs, *peer_recv_bytes;

static int world_rank = -1, world_size = 0, active = 0, multi = 0;
typedef struct { int ndims, size, dims[CART_DIMS], periods[CART_DIMS]; } cart_t;
static cart_t carts[CART_MAX];
static int ncarts;
static double t_init_enter, t_init_exit, t_init_dur;
static uint64_t untracked_requests;
static MPI_Group world_group = MPI_GROUP_NULL;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int depth;

#define LOCK() do { if (multi) pthread_mutex_lock(&lock); } while (0)
#define UNLOCK() do { if (multi) pthread_mutex_unlock(&lock); } while (0)

static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Per-call timestamps.  clock_gettime costs 20-100 ns (more in VMs), a large part of a short MPI
 * call, so on x86-64 with the kernel's clocksource = tsc (invariant, synchronised TSC) the wrappers
 * read the TSC and convert ticks to seconds with the rate measured against CLOCK_MONOTONIC between
 * MPI_Init and MPI_Finalize; otherwise ticks are CLOCK_MONOTONIC nanoseconds. */
static int use_tsc;
static uint64_t tsc_at_init;

#if defined(__x86_64__)
#include <x86intrin.h>
static inline uint64_t tick(void)
{
    if (use_tsc) return __rdtsc();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#else
static inline uint64_t tick(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#endif

static void choose_clock(void)
{
#if defined(__x86_64__)
    char buf[64] = "";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (f) {
        if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
        fclose(f);
    }
    use_tsc = strncmp(buf, "tsc", 3) == 0 && (buf[3] == '\n' || buf[3] == 0);
    if (getenv("PERFCAST_PMPI_NO_TSC")) use_tsc = 0;
#endif
}

static inline int bucket(uint64_t n)
{
    return n == 0 ? 0 : 64 - __builtin_clzll(n);
}

/* ENTER/LEAVE bracket every wrapper: only the outermost intercepted call is accounted. */
#define ENTER()                                                                                        \
    const int outer_ = (depth++ == 0) && active;                                                       \
    const uint64_t t0_ = outer_ ? tick() : 0
#define LEAVE(id)                                                                                      \
    do {                                                                                               \
        if (outer_) {                                                                                  \
            uint64_t dt_ = tick() - t0_;                                                               \
            LOCK();                                                                                    \
            S[id].calls++;                                                                             \
            S[id].ticks += dt_;                                                                        \
            UNLOCK();                                                                                  \
        }                                                                                              \
        depth--;                                                                                       \
    } while (0)
#define OUTER outer_

static inline uint64_t tsize(MPI_Datatype t)
{
    int s = 0;
    if (t == MPI_DATATYPE_NULL) return 0;
    if (PMPI_Type_size(t, &s) != MPI_SUCCESS || s < 0) return 0;
    return (uint64_t)s;
}

static inline uint64_t nbytes(int count, MPI_Datatype t)
{
    return count > 0 ? (uint64_t)count * tsize(t) : 0;
}

/* ---- communicator rank -> world rank ------------------------------------------------------- */
typedef struct {
    const int *map; /* NULL: identity */
    int n;
} rankmap_t;

typedef struct {
    MPI_Comm comm;
    rankmap_t m;
} commslot_t;

static commslot_t comms[COMM_SLOTS];
static int ncomms, comm_next;

static rankmap_t build_map(MPI_Comm comm)
{
    rankmap_t m = {NULL, 0};
    int inter = 0, res = MPI_UNEQUAL;
    MPI_Group g;
    PMPI_Comm_test_inter(comm, &inter);
    if ((inter ? PMPI_Comm_remote_group(comm, &g) : PMPI_Comm_group(comm, &g)) != MPI_SUCCESS) {
        m.n = -1;
        return m;
    }
    PMPI_Group_size(g, &m.n);
    PMPI_Group_compare(g, world_group, &res);
    if (res != MPI_IDENT) {
        int *ranks = malloc(sizeof(int) * (size_t)m.n), *map = malloc(sizeof(int) * (size_t)m.n);
        if (ranks && map) {
            for (int i = 0; i < m.n; i++) ranks[i] = i;
            PMPI_Group_translate_ranks(g, m.n, ranks, world_group, map);
            for (int i = 0; i < m.n; i++) if (map[i] == MPI_UNDEFINED) map[i] = -1;
            m.map = map; /* kept for the whole run: pending requests may point at it */
        } else {
            free(map);
            m.n = -1;
        }
        free(ranks);
    }
    PMPI_Group_free(&g);
    return m;
}

/* caller holds the lock when multi */
static rankmap_t comm_map(MPI_Comm comm)
{
    rankmap_t id = {NULL, world_size};
    if (comm == MPI_COMM_WORLD) return id;
    for (int i = 0; i < ncomms; i++)
        if (comms[i].comm == comm) return comms[i].m;
    rankmap_t m = build_map(comm);
    int slot = ncomms < COMM_SLOTS ? ncomms++ : (comm_next++ % COMM_SLOTS);
    comms[slot].comm = comm;
    comms[slot].m = m;
    return m;
}

static void comm_forget(MPI_Comm comm)
{
    LOCK();
    for (int i = 0; i < ncomms; i++)
        if (comms[i].comm == comm) {
            comms[i] = comms[--ncomms];
            break;
        }
    UNLOCK();
}

static inline int map_rank(rankmap_t m, int r)
{
    if (r < 0 || m.n < 0 || r >= m.n) return -1;
    return m.map ? m.map[r] : r;
}

/* ---- accounting helpers (call only when OUTER) --------------------------------------------- */
static void acc_send(int id, MPI_Comm comm, int dest, uint64_t b)
{
    LOCK();
    if (dest == MPI_PROC_NULL) b = 0;
    S[id].bytes_sent += b;
    S[id].hist[bucket(b)]++;
    if (dest != MPI_PROC_NULL) {
        int w = map_rank(comm_map(comm), dest);
        if (w >= 0 && w < world_size) {
            peer_sent_msgs[w]++;
            peer_sent_bytes[w] += b;
        }
    }
    UNLOCK();
}

static void acc_recv_status(int id, rankmap_t m, const MPI_Status *st)
{
    int n = 0, cancelled = 0;
    if (st->MPI_SOURCE == MPI_PROC_NULL) return; /* MPI_PROC_NULL: empty, nothing arrived */
    PMPI_Test_cancelled(st, &cancelled);
    if (cancelled) return;
    if (PMPI_Get_count(st, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED || n < 0) n = 0;
    LOCK();
    S[id].bytes_recv += (uint64_t)n;
    S[id].hist[bucket((uint64_t)n)]++;
    int w = map_rank(m, st->MPI_SOURCE);
    if (w >= 0 && w < world_size) {
        peer_recv_msgs[w]++;
        peer_recv_bytes[w] += (uint64_t)n;
    }
    UNLOCK();
}

static void acc_recv(int id, MPI_Comm comm, const MPI_Status *st)
{
    rankmap_t m;
    LOCK();
    m = comm_map(comm);
    UNLOCK();
    acc_recv_status(id, m, st);
}

static void acc_coll(int id, uint64_t sent, uint64_t recv)
{
    LOCK();
    S[id].bytes_sent += sent;
    S[id].bytes_recv += recv;
    S[id].hist[bucket(sent > recv ? sent : recv)]++;
    UNLOCK();
}

/* ---- request / message tracking ------------------------------------------------------------ */
/* kinds of tracked handles */
enum { K_RECV = 1, K_PSEND = 2, K_PRECV = 3, K_MESSAGE = 4 };

typedef struct {
    uintptr_t key; /* 0 = empty */
    int kind, id, peer, active;
    uint64_t bytes;    /* persistent sends: bytes per start */
    MPI_Comm comm;     /* persistent sends: for the destination */
    rankmap_t m;
} reqslot_t;

static reqslot_t RT[REQ_SLOTS];

static inline uint32_t rhash(uintptr_t k)
{
    return (uint32_t)(((uint64_t)k * 0x9E3779B97F4A7C15ull) >> (64 - REQ_BITS));
}

/* caller holds the lock */
static reqslot_t *rt_find(uintptr_t k)
{
    if (!k) return NULL;
    for (uint32_t i = rhash(k), n = 0; n < REQ_SLOTS; i = (i + 1) & (REQ_SLOTS - 1), n++) {
        if (RT[i].key == k) return &RT[i];
        if (RT[i].key == 0) return NULL;
    }
    return NULL;
}

static void rt_remove_slot(reqslot_t *e)
{
    /* backward-shift deletion for linear probing */
    uint32_t i = (uint32_t)(e - RT), j = i;
    RT[i].key = 0;
    for (;;) {
        j = (j + 1) & (REQ_SLOTS - 1);
        if (RT[j].key == 0) return;
        uint32_t h = rhash(RT[j].key);
        /* move RT[j] to i if its home h is not cyclically in (i, j] */
        if ((i <= j) ? (h <= i || h > j) : (h <= i && h > j)) {
            RT[i] = RT[j];
            RT[j].key = 0;
            i = j;
        }
    }
}

static void rt_drop(uintptr_t k)
{
    LOCK();
    reqslot_t *e = rt_find(k);
    if (e) rt_remove_slot(e);
    UNLOCK();
}

static void rt_put(reqslot_t v)
{
    LOCK();
    reqslot_t *e = rt_find(v.key);
    if (e) {
        *e = v;
    } else {
        uint32_t i = rhash(v.key), n = 0;
        while (RT[i].key != 0 && n < REQ_SLOTS / 2) { i = (i + 1) & (REQ_SLOTS - 1); n++; }
        if (RT[i].key == 0 && n < REQ_SLOTS / 2) RT[i] = v;
        else untracked_requests++;
    }
    UNLOCK();
}

/* a request handle is about to complete (status valid): account tracked receives */
static void rt_complete(uintptr_t k, const MPI_Status *st)
{
    reqslot_t copy;
    int have = 0;
    LOCK();
    reqslot_t *e = rt_find(k);
    if (e) {
        copy = *e;
        have = 1;
        if (e->kind == K_RECV) rt_remove_slot(e);
        else e->active = 0;
    }
    UNLOCK();
    if (!have || !st) return;
    if (copy.kind == K_RECV || (copy.kind == K_PRECV && copy.active)) acc_recv_status(copy.id, copy.m, st);
}

static inline int tracked(uintptr_t k)
{
    int r;
    LOCK();
    reqslot_t *e = rt_find(k);
    r = e && (e->kind == K_RECV || e->kind == K_PRECV);
    UNLOCK();
    return r;
}

/* ---- init / finalize ----------------------------------------------------------------------- */
static void after_init(void)
{
    int provided = MPI_THREAD_SINGLE;
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    PMPI_Comm_group(MPI_COMM_WORLD, &world_group);
    PMPI_Query_thread(&provided);
    multi = provided == MPI_THREAD_MULTIPLE;
    size_t n = (size_t)(world_size > 0 ? world_size : 1);
    peer_sent_msgs = calloc(n, sizeof(uint64_t));
    peer_sent_bytes = calloc(n, sizeof(uint64_t));
    peer_recv_msgs = calloc(n, sizeof(uint64_t));
    peer_recv_bytes = calloc(n, sizeof(uint64_t));
    if (!peer_sent_msgs || !peer_sent_bytes || !peer_recv_msgs || !peer_recv_bytes) {
        fprintf(stderr, "perfcast_pmpi: out of memory; profiling disabled\n");
        return;
    }
    choose_clock();
    t_init_exit = now();
    tsc_at_init = tick();
    t_init_dur = t_init_exit - t_init_enter;
    active = 1;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void write_profile(double t_end)
{
    const char *dir = getenv("PERFCAST_PMPI_DIR");
    if (!dir || !*dir || !active) return;
    active = 0;
    mkdir(dir, 0777); /* usually exists; EEXIST is fine */
    char path[4096], tmp[4200], host[256] = "", lib[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0, ver = 0, sub = 0, provided = 0;
    gethostname(host, sizeof host - 1);
    PMPI_Get_library_version(lib, &len);
    lib[len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING - 1] = 0;
    for (char *p = lib; *p; p++) if (*p == '\n') { *p = 0; break; }
    PMPI_Get_version(&ver, &sub);
    PMPI_Query_thread(&provided);
    snprintf(path, sizeof path, "%s/pmpi.rank%05d.json", dir, world_rank);
    snprintf(tmp, sizeof tmp, "%s/.pmpi.rank%05d.json.%ld.tmp", dir, world_rank, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "perfcast_pmpi: cannot write %s: %s\n", tmp, strerror(errno));
        return;
    }
    double region = t_end - t_init_exit, mpi = 0.0, sec[R_COUNT];
    uint64_t ticks_region = tick() - tsc_at_init;
    double per_tick = use_tsc ? (ticks_region ? (now() - t_init_exit) / (double)ticks_region : 0.0) : 1e-9;
    for (int r = 0; r < R_COUNT; r++) {
        sec[r] = (double)S[r].ticks * per_tick;
        if (r == R_Init || r == R_Init_thread) sec[r] = S[r].calls ? t_init_dur : 0.0;
        else mpi += sec[r];
    }
    fprintf(f, "{\"format\": \"perfcast-pmpi\", \"version\": %d, \"rank\": %d, \"size\": %d, ",
            PERFCAST_PMPI_VERSION, world_rank, world_size);
    fprintf(f, "\"host\": ");
    json_str(f, host);
    fprintf(f, ", \"pid\": %ld, \"mpi_version\": \"%d.%d\", \"library\": ", (long)getpid(), ver, sub);
    json_str(f, lib);
    fprintf(f, ", \"thread_level\": %d, \"clock\": \"%s\", \"untracked_requests\": %llu,\n",
            provided, use_tsc ? "tsc" : "CLOCK_MONOTONIC", (unsigned long long)untracked_requests);
    fprintf(f, " \"time\": {\"init\": %.9f, \"region\": %.9f, \"mpi\": %.9f, \"app\": %.9f},\n",
            t_init_dur, region, mpi, region - mpi);
    fprintf(f, " \"routines\": [");
    int first = 1;
    for (int r = 0; r < R_COUNT; r++) {
        if (!S[r].calls) continue;
        fprintf(f, "%s\n  {\"name\": \"%s\", \"calls\": %llu, \"bytes_sent\": %llu, \"bytes_recv\": %llu, "
                   "\"time\": %.9f, \"hist\": [",
                first ? "" : ",", routine_name[r], (unsigned long long)S[r].calls,
                (unsigned long long)S[r].bytes_sent, (unsigned long long)S[r].bytes_recv, sec[r]);
        first = 0;
        int hf = 1;
        for (int b = 0; b < NBUCKET; b++) {
            if (!S[r].hist[b]) continue;
            unsigned long long lo = b == 0 ? 0ull : 1ull << (b - 1);
            fprintf(f, "%s[%llu, %llu]", hf ? "" : ", ", lo, (unsigned long long)S[r].hist[b]);
            hf = 0;
        }
        fprintf(f, "]}");
    }
    fprintf(f, "],\n \"peers\": [");
    first = 1;
    for (int w = 0; w < world_size; w++) {
        if (!peer_sent_msgs[w] && !peer_recv_msgs[w]) continue;
        fprintf(f, "%s\n  {\"rank\": %d, \"sent_msgs\": %llu, \"sent_bytes\": %llu, \"recv_msgs\": %llu, "
                   "\"recv_bytes\": %llu}",
                first ? "" : ",", w, (unsigned long long)peer_sent_msgs[w],
                (unsigned long long)peer_sent_bytes[w], (unsigned long long)peer_recv_msgs[w],
                (unsigned long long)peer_recv_bytes[w]);
        first = 0;
    }
    fprintf(f, "],\n \"cart\": [");
    for (int c = 0; c < ncarts; c++) {
        fprintf(f, "%s\n  {\"size\": %d, \"dims\": [", c ? "," : "", carts[c].size);
        for (int i = 0; i < carts[c].ndims; i++) fprintf(f, "%s%d", i ? ", " : "", carts[c].dims[i]);
        fprintf(f, "], \"periods\": [");
        for (int i = 0; i < carts[c].ndims; i++) fprintf(f, "%s%d", i ? ", " : "", carts[c].periods[i] ? 1 : 0);
        fprintf(f, "]}");
    }
    fprintf(f, "]}\n");
    int bad = ferror(f);
    if (fflush(f) != 0) bad = 1;
    if (fsync(fileno(f)) != 0 && errno != EINVAL) bad = 1;
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        fprintf(stderr, "perfcast_pmpi: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
    }
}

int MPI_Init(int *argc, char ***argv)
{
    t_init_enter = now();
    depth++;
    int rc = PMPI_Init(argc, argv);
    depth--;
    if (rc == MPI_SUCCESS) {
        after_init();
        if (active) S[R_Init].calls++;
    }
    return rc;
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    t_init_enter = now();
    depth++;
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    depth--;
    if (rc == MPI_SUCCESS) {
        after_init();
        if (active) S[R_Init_thread].calls++;
    }
    return rc;
}

int MPI_Finalize(void)
{
    double t = now();
    write_profile(t);
    depth++;
    int rc = PMPI_Finalize();
    depth--;
    return rc;
}

int MPI_Comm_free(MPI_Comm *comm)
{
    if (comm) comm_forget(*comm);
    return PMPI_Comm_free(comm);
}

int MPI_Comm_disconnect(MPI_Comm *comm)
{
    if (comm) comm_forget(*comm);
    return PMPI_Comm_disconnect(comm);
}

int MPI_Cart_create(MPI_Comm old, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm *cart)
{
    depth++;
    int rc = PMPI_Cart_create(old, ndims, dims, periods, reorder, cart);
    depth--;
    if (rc == MPI_SUCCESS && active && depth == 0 && ndims >= 1 && ndims <= CART_DIMS) {
        LOCK();
        if (ncarts < CART_MAX) {
            cart_t *c = &carts[ncarts++];
            c->ndims = ndims;
            PMPI_Comm_size(old, &c->size);
            for (int i = 0; i < ndims; i++) {
                c->dims[i] = dims[i];
                c->periods[i] = periods ? periods[i] : 0;
            }
        }
        UNLOCK();
    }
    return rc;
}

/* ---- point-to-point ------------------------------------------------------------------------ */
#define BLOCKING_SEND(NAME)                                                                            \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)    \
    {                                                                                                  \
        ENTER();                                                                                       \
        int rc = PMPI_##NAME(buf, count, type, dest, tag, comm);                                       \
        if (OUTER) acc_send(R_##NAME, comm, dest, nbytes(count, type));                                \
        LEAVE(R_##NAME);                                                                               \
        return rc;                                                                                     \
    }
BLOCKING_SEND(Send)
BLOCKING_SEND(Bsend)
BLOCKING_SEND(Ssend)
BLOCKING_SEND(Rsend)

#define NONBLOCKING_SEND(NAME)                                                                         \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,    \
                   MPI_Request *req)                                                                   \
    {                                                                                                  \
        ENTER();                                                                                       \
        int rc = PMPI_##NAME(buf, count, type, dest, tag, comm, req);                                  \
        if (OUTER) {                                                                                   \
            acc_send(R_##NAME, comm, dest, nbytes(count, type));                                       \
            if (rc == MPI_SUCCESS) rt_drop((uintptr_t)*req);                                           \
        }                                                                                              \
        LEAVE(R_##NAME);                                                                               \
        return rc;                                                                                     \
    }
NONBLOCKING_SEND(Isend)
NONBLOCKING_SEND(Ibsend)
NONBLOCKING_SEND(Issend)
NONBLOCKING_SEND(Irsend)

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    ENTER();
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Recv(buf, count, type, source, tag, comm, OUTER ? st : status);
    if (OUTER && rc == MPI_SUCCESS) acc_recv(R_Recv, comm, st);
    LEAVE(R_Recv);
    return rc;
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                 MPI_Comm comm, MPI_Status *status)
{
    ENTER();
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype,
                           source, recvtag, comm, OUTER ? st : status);
    if (OUTER) {
        acc_send(R_Sendrecv, comm, dest, nbytes(sendcount, sendtype));
        if (rc == MPI_SUCCESS) acc_recv(R_Sendrecv, comm, st);
    }
    LEAVE(R_Sendrecv);
    return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag, int source,
                         int recvtag, MPI_Comm comm, MPI_Status *status)
{
    ENTER();
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int rc = PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm,
                                   OUTER ? st : status);
    if (OUTER) {
        acc_send(R_Sendrecv_replace, comm, dest, nbytes(count, type));
        if (rc == MPI_SUCCESS) acc_recv(R_Sendrecv_replace, comm, st);
    }
    LEAVE(R_Sendrecv_replace);
    return rc;
}

static void track_recv(int id, MPI_Comm comm, MPI_Request req, int kind)
{
    reqslot_t v;
    memset(&v, 0, sizeof v);
    v.key = (uintptr_t)req;
    v.kind = kind;
    v.id = id;
    v.active = kind == K_RECV;
    LOCK();
    v.m = comm_map(comm);
    UNLOCK();
    rt_put(v);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
    ENTER();
    int rc = PMPI_Irecv(buf, count, type, source, tag, comm, req);
    if (OUTER && rc == MPI_SUCCESS) track_recv(R_Irecv, comm, *req, K_RECV);
    LEAVE(R_Irecv);
    return rc;
}

/* persistent requests: sends are counted at every MPI_Start, receives when a started one completes */
#define PERSISTENT_SEND(NAME)                                                                          \
    int MPI_##NAME(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,    \
                   MPI_Request *req)                                                                   \
    {                                                                                                  \
        ENTER();                                                                                       \
        int rc = PMPI_##NAME(buf, count, type, dest, tag, comm, req);                                  \
        if (OUTER && rc == MPI_SUCCESS) {                                                              \
            reqslot_t v;                                                                               \
            memset(&v, 0, sizeof v);                                                                   \
            v.key = (uintptr_t)*req;                                                                   \
            v.kind = K_PSEND;                                                                          \
            v.id = R_##NAME;                                                                           \
            v.peer = dest;                                                                             \
            v.comm = comm;                                                                             \
            v.bytes = nbytes(count, type);                                                             \
            rt_put(v);                                                                                 \
        }                                                                                              \
        LEAVE(R_##NAME);                                                                               \
        return rc;                                                                                     \
    }
PERSISTENT_SEND(Send_init)
PERSISTENT_SEND(Bsend_init)
PERSISTENT_SEND(Ssend_init)
PERSISTENT_SEND(Rsend_init)

int MPI_Recv_init(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Request *req)
{
    ENTER();
    int rc = PMPI_Recv_init(buf, count, type, source, tag, comm, req);
    if (OUTER && rc == MPI_SUCCESS) track_recv(R_Recv_init, comm, *req, K_PRECV);
    LEAVE(R_Recv_init);
    return rc;
}

static void started(MPI_Request req)
{
    reqslot_t copy;
    int have = 0;
    LOCK();
    reqslot_t *e = rt_find((uintptr_t)req);
    if (e) {
        e->active = 1;
        copy = *e;
        have = 1;
    }
    UNLOCK();
    if (have && copy.kind == K_PSEND) acc_send(copy.id, copy.comm, copy.peer, copy.bytes);
}

int MPI_Start(MPI_Request *req)
{
    ENTER();
    MPI_Request r = req ? *req : MPI_REQUEST_NULL;
    int rc = PMPI_Start(req);
    if (OUTER && rc == MPI_SUCCESS) started(r);
    LEAVE(R_Start);
    return rc;
}

int MPI_Startall(int count, MPI_Request reqs[])
{
    ENTER();
    int rc = PMPI_Startall(count, reqs);
    if (OUTER && rc == MPI_SUCCESS)
        for (int i = 0; i < count; i++) started(reqs[i]);
    LEAVE(R_Startall);
    return rc;
}

int MPI_Request_free(MPI_Request *req)
{
    ENTER();
    MPI_Request r = req ? *req : MPI_REQUEST_NULL;
    int rc = PMPI_Request_free(req);
    if (OUTER && rc == MPI_SUCCESS) rt_drop((uintptr_t)r);
    LEAVE(R_Request_free);
    return rc;
}

int MPI_Cancel(MPI_Request *req)
{
    ENTER();
    int rc = PMPI_Cancel(req);
    LEAVE(R_Cancel);
    return rc;
}

/* ---- completion ---------------------------------------------------------------------------- */
typedef struct {
    MPI_Request *handles;
    MPI_Status *statuses;
    MPI_Request hbuf[PERFCAST_SCRATCH];
    MPI_Status sbuf[PERFCAST_SCRATCH];
    int heap;
} scratch_t;

static __thread scratch_t scr;

/* Snapshot the handles of an array of requests; returns 1 when any of them is a tracked receive.
 * Fills scr.handles and, when the user ignores statuses, points *st at scratch statuses. */
static int snapshot(int count, const MPI_Request reqs[], MPI_Status **st)
{
    int any = 0;
    for (int i = 0; i < count; i++)
        if (reqs[i] != MPI_REQUEST_NULL && tracked((uintptr_t)reqs[i])) { any = 1; break; }
    if (!any) return 0;
    scr.heap = count > PERFCAST_SCRATCH;
    if (scr.heap) {
        scr.handles = malloc(sizeof(MPI_Request) * (size_t)count);
        scr.statuses = *st == MPI_STATUSES_IGNORE ? malloc(sizeof(MPI_Status) * (size_t)count) : NULL;
        if (!scr.handles || (*st == MPI_STATUSES_IGNORE && !scr.statuses)) {
            free(scr.handles);
            free(scr.statuses);
            scr.heap = 0;
            return 0;
        }
    } else {
        scr.handles = scr.hbuf;
        scr.statuses = scr.sbuf;
    }
    memcpy(scr.handles, reqs, sizeof(MPI_Request) * (size_t)count);
    if (*st == MPI_STATUSES_IGNORE) *st = scr.statuses;
    return 1;
}

static void snapshot_done(void)
{
    if (scr.heap) {
        free(scr.handles);
        if (scr.statuses != scr.sbuf) free(scr.statuses);
        scr.heap = 0;
    }
}

int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    ENTER();
    MPI_Status local;
    MPI_Request r = req ? *req : MPI_REQUEST_NULL;
    int track = OUTER && r != MPI_REQUEST_NULL && tracked((uintptr_t)r);
    MPI_Status *st = (track && status == MPI_STATUS_IGNORE) ? &local : status;
    int rc = PMPI_Wait(req, st);
    if (track && rc == MPI_SUCCESS) rt_complete((uintptr_t)r, st);
    LEAVE(R_Wait);
    return rc;
}

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    ENTER();
    MPI_Status local;
    MPI_Request r = req ? *req : MPI_REQUEST_NULL;
    int track = OUTER && r != MPI_REQUEST_NULL && tracked((uintptr_t)r);
    MPI_Status *st = (track && status == MPI_STATUS_IGNORE) ? &local : status;
    int rc = PMPI_Test(req, flag, st);
    if (track && rc == MPI_SUCCESS && *flag) rt_complete((uintptr_t)r, st);
    LEAVE(R_Test);
    return rc;
}

int MPI_Waitall(int count, MPI_Request reqs[], MPI_Status *statuses)
{
    ENTER();
    MPI_Status *st = statuses;
    int track = OUTER && snapshot(count, reqs, &st);
    int rc = PMPI_Waitall(count, reqs, st);
    if (track) {
        if (rc == MPI_SUCCESS)
            for (int i = 0; i < count; i++)
                if (scr.handles[i] != MPI_REQUEST_NULL) rt_complete((uintptr_t)scr.handles[i], &st[i]);
        snapshot_done();
    }
    LEAVE(R_Waitall);
    return rc;
}

int MPI_Testall(int count, MPI_Request reqs[], int *flag, MPI_Status *statuses)
{
    ENTER();
    MPI_Status *st = statuses;
    int track = OUTER && snapshot(count, reqs, &st);
    int rc = PMPI_Testall(count, reqs, flag, st);
    if (track) {
        if (rc == MPI_SUCCESS && *flag)
            for (int i = 0; i < count; i++)
                if (scr.handles[i] != MPI_REQUEST_NULL) rt_complete((uintptr_t)scr.handles[i], &st[i]);
        snapshot_done();
    }
    LEAVE(R_Testall);
    return rc;
}

int MPI_Waitany(int count, MPI_Request reqs[], int *index, MPI_Status *status)
{
    ENTER();
    MPI_Status local, *dummy = MPI_STATUSES_IGNORE;
    int track = OUTER && snapshot(count, reqs, &dummy);
    MPI_Status *st = (track && status == MPI_STATUS_IGNORE) ? &local : status;
    int rc = PMPI_Waitany(count, reqs, index, st);
    if (track) {
        if (rc == MPI_SUCCESS && *index != MPI_UNDEFINED) rt_complete((uintptr_t)scr.handles[*index], st);
        snapshot_done();
    }
    LEAVE(R_Waitany);
    return rc;
}

int MPI_Testany(int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    ENTER();
    MPI_Status local, *dummy = MPI_STATUSES_IGNORE;
    int track = OUTER && snapshot(count, reqs, &dummy);
    MPI_Status *st = (track && status == MPI_STATUS_IGNORE) ? &local : status;
    int rc = PMPI_Testany(count, reqs, index, flag, st);
    if (track) {
        if (rc == MPI_SUCCESS && *flag && *index != MPI_UNDEFINED)
            rt_complete((uintptr_t)scr.handles[*index], st);
        snapshot_done();
    }
    LEAVE(R_Testany);
    return rc;
}

int MPI_Waitsome(int incount, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    ENTER();
    MPI_Status *st = statuses;
    int track = OUTER && snapshot(incount, reqs, &st);
    int rc = PMPI_Waitsome(incount, reqs, outcount, indices, st);
    if (track) {
        if (rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED)
            for (int i = 0; i < *outcount; i++) rt_complete((uintptr_t)scr.handles[indices[i]], &st[i]);
        snapshot_done();
    }
    LEAVE(R_Waitsome);
    return rc;
}

int MPI_Testsome(int incount, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    ENTER();
    MPI_Status *st = statuses;
    int track = OUTER && snapshot(incount, reqs, &st);
    int rc = PMPI_Testsome(incount, reqs, outcount, indices, st);
    if (track) {
        if (rc == MPI_SUCCESS && *outcount != MPI_UNDEFINED)
            for (int i = 0; i < *outcount; i++) rt_complete((uintptr_t)scr.handles[indices[i]], &st[i]);
        snapshot_done();
    }
    LEAVE(R_Testsome);
    return rc;
}

/* ---- probes and matched receives ----------------------------------------------------------- */
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    ENTER();
    int rc = PMPI_Probe(source, tag, comm, status);
    LEAVE(R_Probe);
    return rc;
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    ENTER();
    int rc = PMPI_Iprobe(source, tag, comm, flag, status);
    LEAVE(R_Iprobe);
    return rc;
}

static void track_message(MPI_Comm comm, MPI_Message msg)
{
    if (msg == MPI_MESSAGE_NULL || msg == MPI_MESSAGE_NO_PROC) return;
    reqslot_t v;
    memset(&v, 0, sizeof v);
    v.key = (uintptr_t)msg;
    v.kind = K_MESSAGE;
    LOCK();
    v.m = comm_map(comm);
    UNLOCK();
    rt_put(v);
}

/* the communicator's rank map of a matched message (and forget the message) */
static rankmap_t take_message(MPI_Message msg, int *found)
{
    rankmap_t m = {NULL, -1};
    *found = 0;
    LOCK();
    reqslot_t *e = rt_find((uintptr_t)msg);
    if (e && e->kind == K_MESSAGE) {
        m = e->m;
        *found = 1;
        rt_remove_slot(e);
    }
    UNLOCK();
    return m;
}

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status)
{
    ENTER();
    int rc = PMPI_Mprobe(source, tag, comm, message, status);
    if (OUTER && rc == MPI_SUCCESS) track_message(comm, *message);
    LEAVE(R_Mprobe);
    return rc;
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status)
{
    ENTER();
    int rc = PMPI_Improbe(source, tag, comm, flag, message, status);
    if (OUTER && rc == MPI_SUCCESS && *flag) track_message(comm, *message);
    LEAVE(R_Improbe);
    return rc;
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Status *status)
{
    ENTER();
    MPI_Status local;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &local : status;
    int found = 0;
    rankmap_t m = {NULL, -1};
    if (OUTER && message) m = take_message(*message, &found);
    int rc = PMPI_Mrecv(buf, count, type, message, OUTER ? st : status);
    if (OUTER && rc == MPI_SUCCESS) acc_recv_status(R_Mrecv, m, st);
    LEAVE(R_Mrecv);
    return rc;
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype type, MPI_Message *message, MPI_Request *req)
{
    ENTER();
    int found = 0;
    rankmap_t m = {NULL, -1};
    if (OUTER && message) m = take_message(*message, &found);
    int rc = PMPI_Imrecv(buf, count, type, message, req);
    if (OUTER && rc == MPI_SUCCESS) {
        reqslot_t v;
        memset(&v, 0, sizeof v);
        v.key = (uintptr_t)*req;
        v.kind = K_RECV;
        v.id = R_Imrecv;
        v.active = 1;
        v.m = m;
        rt_put(v);
    }
    LEAVE(R_Imrecv);
    return rc;
}

/* ---- collectives --------------------------------------------------------------------------- */
typedef struct { uint64_t sent, recv; } io_t;

static int grp_size(MPI_Comm comm)
{
    int inter = 0, n = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) PMPI_Comm_remote_size(comm, &n);
    else PMPI_Comm_size(comm, &n);
    return n;
}

static int my_rank(MPI_Comm comm)
{
    int r = 0;
    PMPI_Comm_rank(comm, &r);
    return r;
}

static int is_inter(MPI_Comm comm)
{
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    return inter;
}

/* role at a rooted collective: 1 root, 0 non-root contributor, -1 not participating */
static int role(MPI_Comm comm, int root)
{
    if (is_inter(comm)) return root == MPI_ROOT ? 1 : root == MPI_PROC_NULL ? -1 : 0;
    return my_rank(comm) == root;
}

static uint64_t sum_counts(const int *c, int n, MPI_Datatype t)
{
    uint64_t s = 0;
    if (!c) return 0;
    for (int i = 0; i < n; i++) if (c[i] > 0) s += (uint64_t)c[i];
    return s * tsize(t);
}

static io_t b_bcast(int count, MPI_Datatype t, int root, MPI_Comm comm)
{
    io_t io = {0, 0};
    int r = role(comm, root);
    if (r == 1) io.sent = nbytes(count, t);
    else if (r == 0) io.recv = nbytes(count, t);
    return io;
}

static io_t b_reduce(int count, MPI_Datatype t, int root, MPI_Comm comm)
{
    io_t io = {0, 0};
    uint64_t b = nbytes(count, t);
    if (is_inter(comm)) {
        if (root == MPI_ROOT) io.recv = b;
        else if (root != MPI_PROC_NULL) io.sent = b;
    } else {
        io.sent = b;
        if (my_rank(comm) == root) io.recv = b;
    }
    return io;
}

static io_t b_gather(const void *sbuf, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt,
                     int root, MPI_Comm comm)
{
    io_t io = {0, 0};
    int r = role(comm, root);
    if (r == 1) {
        io.recv = (uint64_t)grp_size(comm) * nbytes(rcount, rt);
        if (!is_inter(comm)) io.sent = sbuf == MPI_IN_PLACE ? nbytes(rcount, rt) : nbytes(scount, st);
    } else if (r == 0) {
        io.sent = nbytes(scount, st);
    }
    return io;
}

static io_t b_gatherv(const void *sbuf, int scount, MPI_Datatype st, const int *rcounts, MPI_Datatype rt,
                      int root, MPI_Comm comm)
{
    io_t io = {0, 0};
    int r = role(comm, root);
    if (r == 1) {
        io.recv = sum_counts(rcounts, grp_size(comm), rt);
        if (!is_inter(comm))
            io.sent = sbuf == MPI_IN_PLACE ? nbytes(rcounts[my_rank(comm)], rt) : nbytes(scount, st);
    } else if (r == 0) {
        io.sent = nbytes(scount, st);
    }
    return io;
}

static io_t b_scatter(int scount, MPI_Datatype st, const void *rbuf, int rcount, MPI_Datatype rt,
                      int root, MPI_Comm comm)
{
    io_t io = {0, 0};
    int r = role(comm, root);
    if (r == 1) {
        io.sent = (uint64_t)grp_size(comm) * nbytes(scount, st);
        if (!is_inter(comm)) io.recv = rbuf == MPI_IN_PLACE ? nbytes(scount, st) : nbytes(rcount, rt);
    } else if (r == 0) {
        io.recv = nbytes(rcount, rt);
    }
    return io;
}

static io_t b_scatterv(const int *scounts, MPI_Datatype st, const void *rbuf, int rcount, MPI_Datatype rt,
                       int root, MPI_Comm comm)
{
    io_t io = {0, 0};
    int r = role(comm, root);
    if (r == 1) {
        io.sent = sum_counts(scounts, grp_size(comm), st);
        if (!is_inter(comm))
            io.recv = rbuf == MPI_IN_PLACE ? nbytes(scounts[my_rank(comm)], st) : nbytes(rcount, rt);
    } else if (r == 0) {
        io.recv = nbytes(rcount, rt);
    }
    return io;
}

static io_t b_allgather(const void *sbuf, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, MPI_Comm comm)
{
    io_t io;
    io.recv = (uint64_t)grp_size(comm) * nbytes(rcount, rt);
    io.sent = sbuf == MPI_IN_PLACE ? nbytes(rcount, rt) : nbytes(scount, st);
    return io;
}

static io_t b_allgatherv(const void *sbuf, int scount, MPI_Datatype st, const int *rcounts, MPI_Datatype rt,
                         MPI_Comm comm)
{
    io_t io;
    io.recv = sum_counts(rcounts, grp_size(comm), rt);
    io.sent = sbuf == MPI_IN_PLACE ? nbytes(rcounts[my_rank(comm)], rt) : nbytes(scount, st);
    return io;
}

static io_t b_alltoall(const void *sbuf, int scount, MPI_Datatype st, int rcount, MPI_Datatype rt, MPI_Comm comm)
{
    io_t io;
    uint64_t p = (uint64_t)grp_size(comm);
    io.recv = p * nbytes(rcount, rt);
    io.sent = sbuf == MPI_IN_PLACE ? io.recv : p * nbytes(scount, st);
    return io;
}

static io_t b_alltoallv(const void *sbuf, const int *scounts, MPI_Datatype st, const int *rcounts,
                        MPI_Datatype rt, MPI_Comm comm)
{
    io_t io;
    int p = grp_size(comm);
    io.recv = sum_counts(rcounts, p, rt);
    io.sent = sbuf == MPI_IN_PLACE ? io.recv : sum_counts(scounts, p, st);
    return io;
}

static io_t b_alltoallw(const void *sbuf, const int *scounts, const MPI_Datatype *st, const int *rcounts,
                        const MPI_Datatype *rt, MPI_Comm comm)
{
    io_t io = {0, 0};
    int p = grp_size(comm);
    for (int i = 0; i < p; i++) {
        io.recv += nbytes(rcounts[i], rt[i]);
        if (sbuf != MPI_IN_PLACE) io.sent += nbytes(scounts[i], st[i]);
    }
    if (sbuf == MPI_IN_PLACE) io.sent = io.recv;
    return io;
}

static io_t b_reduce_scatter(const int *rcounts, MPI_Datatype t, MPI_Comm comm)
{
    io_t io;
    io.sent = sum_counts(rcounts, is_inter(comm) ? 0 : grp_size(comm), t);
    io.recv = nbytes(rcounts[my_rank(comm)], t);
    if (is_inter(comm)) io.sent = io.recv; /* intercommunicator: sizes of the remote side unknown here */
    return io;
}

static io_t b_reduce_scatter_block(int rcount, MPI_Datatype t, MPI_Comm comm)
{
    io_t io;
    int n = 0;
    PMPI_Comm_size(comm, &n);
    io.recv = nbytes(rcount, t);
    io.sent = (uint64_t)n * io.recv;
    return io;
}

static io_t b_sym(int count, MPI_Datatype t)
{
    io_t io;
    io.sent = io.recv = nbytes(count, t);
    return io;
}

/* blocking + non-blocking wrappers share one byte rule */
#define COLL(NAME, PARAMS, ARGS, IO)                                                                   \
    int MPI_##NAME PARAMS                                                                              \
    {                                                                                                  \
        ENTER();                                                                                       \
        int rc = PMPI_##NAME ARGS;                                                                     \
        if (OUTER) {                                                                                   \
            io_t io_ = IO;                                                                             \
            acc_coll(R_##NAME, io_.sent, io_.recv);                                                    \
        }                                                                                              \
        LEAVE(R_##NAME);                                                                               \
        return rc;                                                                                     \
    }
#define ICOLL(NAME, PARAMS, ARGS, IO)                                                                  \
    int MPI_##NAME PARAMS                                                                              \
    {                                                                                                  \
        ENTER();                                                                                       \
        int rc = PMPI_##NAME ARGS;                                                                     \
        if (OUTER) {                                                                                   \
            io_t io_ = IO;                                                                             \
            acc_coll(R_##NAME, io_.sent, io_.recv);                                                    \
            if (rc == MPI_SUCCESS) rt_drop((uintptr_t)*request);                                       \
        }                                                                                              \
        LEAVE(R_##NAME);                                                                               \
        return rc;                                                                                     \
    }
#define ZERO ((io_t){0, 0})

COLL(Barrier, (MPI_Comm comm), (comm), ZERO)
ICOLL(Ibarrier, (MPI_Comm comm, MPI_Request *request), (comm, request), ZERO)

COLL(Bcast, (void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm), (buf, count, t, root, comm),
     b_bcast(count, t, root, comm))
ICOLL(Ibcast, (void *buf, int count, MPI_Datatype t, int root, MPI_Comm comm, MPI_Request *request),
      (buf, count, t, root, comm, request), b_bcast(count, t, root, comm))

COLL(Reduce, (const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm),
     (sb, rb, count, t, op, root, comm), b_reduce(count, t, root, comm))
ICOLL(Ireduce, (const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm,
                MPI_Request *request),
      (sb, rb, count, t, op, root, comm, request), b_reduce(count, t, root, comm))

COLL(Allreduce, (const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
     (sb, rb, count, t, op, comm), b_sym(count, t))
ICOLL(Iallreduce, (const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                   MPI_Request *request),
      (sb, rb, count, t, op, comm, request), b_sym(count, t))

COLL(Scan, (const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
     (sb, rb, count, t, op, comm), b_sym(count, t))
ICOLL(Iscan, (const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
              MPI_Request *request),
      (sb, rb, count, t, op, comm, request), b_sym(count, t))
COLL(Exscan, (const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
     (sb, rb, count, t, op, comm), b_sym(count, t))
ICOLL(Iexscan, (const void *sb, void *rb, int count, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                MPI_Request *request),
      (sb, rb, count, t, op, comm, request), b_sym(count, t))

COLL(Gather, (const void *sb, int sc, MPI_Datatype st, void *rb, int rc_, MPI_Datatype rt, int root, MPI_Comm comm),
     (sb, sc, st, rb, rc_, rt, root, comm), b_gather(sb, sc, st, rc_, rt, root, comm))
ICOLL(Igather, (const void *sb, int sc, MPI_Datatype st, void *rb, int rc_, MPI_Datatype rt, int root,
                MPI_Comm comm, MPI_Request *request),
      (sb, sc, st, rb, rc_, rt, root, comm, request), b_gather(sb, sc, st, rc_, rt, root, comm))

COLL(Gatherv, (const void *sb, int sc, MPI_Datatype st, void *rb, const int rcs[], const int displs[],
               MPI_Datatype rt, int root, MPI_Comm comm),
     (sb, sc, st, rb, rcs, displs, rt, root, comm), b_gatherv(sb, sc, st, rcs, rt, root, comm))
ICOLL(Igatherv, (const void *sb, int sc, MPI_Datatype st, void *rb, const int rcs[], const int displs[],
                 MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *request),
      (sb, sc, st, rb, rcs, displs, rt, root, comm, request), b_gatherv(sb, sc, st, rcs, rt, root, comm))

COLL(Scatter, (const void *sb, int sc, MPI_Datatype st, void *rb, int rc_, MPI_Datatype rt, int root, MPI_Comm comm),
     (sb, sc, st, rb, rc_, rt, root, comm), b_scatter(sc, st, rb, rc_, rt, root, comm))
ICOLL(Iscatter, (const void *sb, int sc, MPI_Datatype st, void *rb, int rc_, MPI_Datatype rt, int root,
                 MPI_Comm comm, MPI_Request *request),
      (sb, sc, st, rb, rc_, rt, root, comm, request), b_scatter(sc, st, rb, rc_, rt, root, comm))

COLL(Scatterv, (const void *sb, const int scs[], const int displs[], MPI_Datatype st, void *rb, int rc_,
                MPI_Datatype rt, int root, MPI_Comm comm),
     (sb, scs, displs, st, rb, rc_, rt, root, comm), b_scatterv(scs, st, rb, rc_, rt, root, comm))
ICOLL(Iscatterv, (const void *sb, const int scs[], const int displs[], MPI_Datatype st, void *rb, int rc_,
                  MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *request),
      (sb, scs, displs, st, rb, rc_, rt, root, comm, request), b_scatterv(scs, st, rb, rc_, rt, root, comm))

COLL(Allgather, (const void *sb, int sc, MPI_Datatype st, void *rb, int rc_, MPI_Datatype rt, MPI_Comm comm),
     (sb, sc, st, rb, rc_, rt, comm), b_allgather(sb, sc, st, rc_, rt, comm))
ICOLL(Iallgather, (const void *sb, int sc, MPI_Datatype st, void *rb, int rc_, MPI_Datatype rt, MPI_Comm comm,
                   MPI_Request *request),
      (sb, sc, st, rb, rc_, rt, comm, request), b_allgather(sb, sc, st, rc_, rt, comm))

COLL(Allgatherv, (const void *sb, int sc, MPI_Datatype st, void *rb, const int rcs[], const int displs[],
                  MPI_Datatype rt, MPI_Comm comm),
     (sb, sc, st, rb, rcs, displs, rt, comm), b_allgatherv(sb, sc, st, rcs, rt, comm))
ICOLL(Iallgatherv, (const void *sb, int sc, MPI_Datatype st, void *rb, const int rcs[], const int displs[],
                    MPI_Datatype rt, MPI_Comm comm, MPI_Request *request),
      (sb, sc, st, rb, rcs, displs, rt, comm, request), b_allgatherv(sb, sc, st, rcs, rt, comm))

COLL(Alltoall, (const void *sb, int sc, MPI_Datatype st, void *rb, int rc_, MPI_Datatype rt, MPI_Comm comm),
     (sb, sc, st, rb, rc_, rt, comm), b_alltoall(sb, sc, st, rc_, rt, comm))
ICOLL(Ialltoall, (const void *sb, int sc, MPI_Datatype st, void *rb, int rc_, MPI_Datatype rt, MPI_Comm comm,
                  MPI_Request *request),
      (sb, sc, st, rb, rc_, rt, comm, request), b_alltoall(sb, sc, st, rc_, rt, comm))

COLL(Alltoallv, (const void *sb, const int scs[], const int sd[], MPI_Datatype st, void *rb, const int rcs[],
                 const int rd[], MPI_Datatype rt, MPI_Comm comm),
     (sb, scs, sd, st, rb, rcs, rd, rt, comm), b_alltoallv(sb, scs, st, rcs, rt, comm))
ICOLL(Ialltoallv, (const void *sb, const int scs[], const int sd[], MPI_Datatype st, void *rb, const int rcs[],
                   const int rd[], MPI_Datatype rt, MPI_Comm comm, MPI_Request *request),
      (sb, scs, sd, st, rb, rcs, rd, rt, comm, request), b_alltoallv(sb, scs, st, rcs, rt, comm))

COLL(Alltoallw, (const void *sb, const int scs[], const int sd[], const MPI_Datatype sts[], void *rb,
                 const int rcs[], const int rd[], const MPI_Datatype rts[], MPI_Comm comm),
     (sb, scs, sd, sts, rb, rcs, rd, rts, comm), b_alltoallw(sb, scs, sts, rcs, rts, comm))
ICOLL(Ialltoallw, (const void *sb, const int scs[], const int sd[], const MPI_Datatype sts[], void *rb,
                   const int rcs[], const int rd[], const MPI_Datatype rts[], MPI_Comm comm, MPI_Request *request),
      (sb, scs, sd, sts, rb, rcs, rd, rts, comm, request), b_alltoallw(sb, scs, sts, rcs, rts, comm))

COLL(Reduce_scatter, (const void *sb, void *rb, const int rcs[], MPI_Datatype t, MPI_Op op, MPI_Comm comm),
     (sb, rb, rcs, t, op, comm), b_reduce_scatter(rcs, t, comm))
ICOLL(Ireduce_scatter, (const void *sb, void *rb, const int rcs[], MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                        MPI_Request *request),
      (sb, rb, rcs, t, op, comm, request), b_reduce_scatter(rcs, t, comm))

COLL(Reduce_scatter_block, (const void *sb, void *rb, int rc_, MPI_Datatype t, MPI_Op op, MPI_Comm comm),
     (sb, rb, rc_, t, op, comm), b_reduce_scatter_block(rc_, t, comm))
ICOLL(Ireduce_scatter_block, (const void *sb, void *rb, int rc_, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                              MPI_Request *request),
      (sb, rb, rc_, t, op, comm, request), b_reduce_scatter_block(rc_, t, comm))

/* ---- Fortran bindings (FORTRAN) -----------------------------------------------------------------
 * Open MPI's Fortran layer (libmpi_mpifh: mpi_send_ == ompi_send_f) calls PMPI_Send directly, so
 * Fortran programs bypass the C wrappers above.  These wrappers take the Fortran arguments, call the
 * library's pmpi_xxx_ (declared weak: a C program does not load libmpi_mpifh) and account with the
 * same rules.  Intercepted: Init, Init_thread, Finalize, Send, Bsend, Ssend, Rsend, Recv, Sendrecv,
 * Isend, Ibsend, Issend, Irsend, Irecv, Wait, Waitall, Test, Barrier, Bcast, Reduce, Allreduce,
 * Gather, Scatter, Allgather, Alltoall.  Other Fortran calls are not seen. */
typedef MPI_Fint F;
#define FSTATUS_LEN ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))

/* export impl under the Fortran names (lower, lower_, lower__, UPPER, ompi_lower_f) */
#define FALIASES(PARAMS, impl, l, U)                                                                   \
    void l PARAMS __attribute__((alias(#impl)));                                                       \
    void l##_ PARAMS __attribute__((alias(#impl)));                                                    \
    void l##__ PARAMS __attribute__((alias(#impl)));                                                   \
    void U PARAMS __attribute__((alias(#impl)));

#pragma weak pmpi_init_
#pragma weak pmpi_init_thread_
#pragma weak pmpi_finalize_
void pmpi_init_(F *ierr);
void pmpi_init_thread_(F *required, F *provided, F *ierr);
void pmpi_finalize_(F *ierr);

static void f_init(F *ierr)
{
    t_init_enter = now();
    depth++;
    pmpi_init_(ierr);
    depth--;
    if (*ierr == MPI_SUCCESS) {
        after_init();
        if (active) S[R_Init].calls++;
    }
}
FALIASES((F * ierr), f_init, mpi_init, MPI_INIT)
void ompi_init_f(F *ierr) __attribute__((alias("f_init")));

static void f_init_thread(F *required, F *provided, F *ierr)
{
    t_init_enter = now();
    depth++;
    pmpi_init_thread_(required, provided, ierr);
    depth--;
    if (*ierr == MPI_SUCCESS) {
        after_init();
        if (active) S[R_Init_thread].calls++;
    }
}
FALIASES((F * required, F *provided, F *ierr), f_init_thread, mpi_init_thread, MPI_INIT_THREAD)
void ompi_init_thread_f(F *required, F *provided, F *ierr) __attribute__((alias("f_init_thread")));

static void f_finalize(F *ierr)
{
    double t = now();
    write_profile(t);
    depth++;
    pmpi_finalize_(ierr);
    depth--;
}
FALIASES((F * ierr), f_finalize, mpi_finalize, MPI_FINALIZE)
void ompi_finalize_f(F *ierr) __attribute__((alias("f_finalize")));

#define F_SEND(NAME, sh, SH)                                                                     \
    extern void pmpi_##sh##_(char *, F *, F *, F *, F *, F *, F *) __attribute__((weak));               \
    static void f_##sh(char *buf, F *count, F *type, F *dest, F *tag, F *comm, F *ierr)             \
    {                                                                                                  \
        ENTER();                                                                                       \
        pmpi_##sh##_(buf, count, type, dest, tag, comm, ierr);                                          \
        if (OUTER)                                                                                     \
            acc_send(R_##NAME, PMPI_Comm_f2c(*comm), *dest, nbytes(*count, PMPI_Type_f2c(*type)));     \
        LEAVE(R_##NAME);                                                                               \
    }                                                                                                  \
    FALIASES((char *buf, F *count, F *type, F *dest, F *tag, F *comm, F *ierr), f_##sh, mpi_##sh, MPI_##SH) \
    void ompi_##sh##_f(char *buf, F *count, F *type, F *dest, F *tag, F *comm, F *ierr)            \
        __attribute__((alias("f_" #sh)));
F_SEND(Send, send, SEND)
F_SEND(Bsend, bsend, BSEND)
F_SEND(Ssend, ssend, SSEND)
F_SEND(Rsend, rsend, RSEND)

#define F_ISEND(NAME, sh, SH)                                                                    \
    extern void pmpi_##sh##_(char *, F *, F *, F *, F *, F *, F *, F *) __attribute__((weak));          \
    static void f_##sh(char *buf, F *count, F *type, F *dest, F *tag, F *comm, F *req, F *ierr)     \
    {                                                                                                  \
        ENTER();                                                                                       \
        pmpi_##sh##_(buf, count, type, dest, tag, comm, req, ierr);                                     \
        if (OUTER) {                                                                                   \
            acc_send(R_##NAME, PMPI_Comm_f2c(*comm), *dest, nbytes(*count, PMPI_Type_f2c(*type)));     \
            if (*ierr == MPI_SUCCESS) rt_drop((uintptr_t)PMPI_Request_f2c(*req));                      \
        }                                                                                              \
        LEAVE(R_##NAME);                                                                               \
    }                                                                                                  \
    FALIASES((char *buf, F *count, F *type, F *dest, F *tag, F *comm, F *req, F *ierr), f_##sh, mpi_##sh, MPI_##SH) \
    void ompi_##sh##_f(char *buf, F *count, F *type, F *dest, F *tag, F *comm, F *req, F *ierr)    \
        __attribute__((alias("f_" #sh)));
F_ISEND(Isend, isend, ISEND)
F_ISEND(Ibsend, ibsend, IBSEND)
F_ISEND(Issend, issend, ISSEND)
F_ISEND(Irsend, irsend, IRSEND)

#pragma weak pmpi_recv_
void pmpi_recv_(char *, F *, F *, F *, F *, F *, F *, F *);
static void f_recv(char *buf, F *count, F *type, F *source, F *tag, F *comm, F *status, F *ierr)
{
    ENTER();
    F local[FSTATUS_LEN];
    F *st = (OUTER && status == MPI_F_STATUS_IGNORE) ? local : status;
    pmpi_recv_(buf, count, type, source, tag, comm, st, ierr);
    if (OUTER && *ierr == MPI_SUCCESS) {
        MPI_Status cs;
        PMPI_Status_f2c(st, &cs);
        acc_recv(R_Recv, PMPI_Comm_f2c(*comm), &cs);
    }
    LEAVE(R_Recv);
}
FALIASES((char *buf, F *count, F *type, F *source, F *tag, F *comm, F *status, F *ierr), f_recv, mpi_recv, MPI_RECV)
void ompi_recv_f(char *buf, F *count, F *type, F *source, F *tag, F *comm, F *status, F *ierr)
    __attribute__((alias("f_recv")));

#pragma weak pmpi_sendrecv_
void pmpi_sendrecv_(char *, F *, F *, F *, F *, char *, F *, F *, F *, F *, F *, F *, F *);
static void f_sendrecv(char *sbuf, F *scount, F *stype, F *dest, F *stag, char *rbuf, F *rcount, F *rtype,
                       F *source, F *rtag, F *comm, F *status, F *ierr)
{
    ENTER();
    F local[FSTATUS_LEN];
    F *st = (OUTER && status == MPI_F_STATUS_IGNORE) ? local : status;
    pmpi_sendrecv_(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source, rtag, comm, st, ierr);
    if (OUTER) {
        MPI_Comm c = PMPI_Comm_f2c(*comm);
        acc_send(R_Sendrecv, c, *dest, nbytes(*scount, PMPI_Type_f2c(*stype)));
        if (*ierr == MPI_SUCCESS) {
            MPI_Status cs;
            PMPI_Status_f2c(st, &cs);
            acc_recv(R_Sendrecv, c, &cs);
        }
    }
    LEAVE(R_Sendrecv);
}
FALIASES((char *sbuf, F *scount, F *stype, F *dest, F *stag, char *rbuf, F *rcount, F *rtype, F *source,
          F *rtag, F *comm, F *status, F *ierr), f_sendrecv, mpi_sendrecv, MPI_SENDRECV)
void ompi_sendrecv_f(char *sbuf, F *scount, F *stype, F *dest, F *stag, char *rbuf, F *rcount, F *rtype,
                     F *source, F *rtag, F *comm, F *status, F *ierr) __attribute__((alias("f_sendrecv")));

#pragma weak pmpi_irecv_
void pmpi_irecv_(char *, F *, F *, F *, F *, F *, F *, F *);
static void f_irecv(char *buf, F *count, F *type, F *source, F *tag, F *comm, F *req, F *ierr)
{
    ENTER();
    pmpi_irecv_(buf, count, type, source, tag, comm, req, ierr);
    if (OUTER && *ierr == MPI_SUCCESS) track_recv(R_Irecv, PMPI_Comm_f2c(*comm), PMPI_Request_f2c(*req), K_RECV);
    LEAVE(R_Irecv);
}
FALIASES((char *buf, F *count, F *type, F *source, F *tag, F *comm, F *req, F *ierr), f_irecv, mpi_irecv, MPI_IRECV)
void ompi_irecv_f(char *buf, F *count, F *type, F *source, F *tag, F *comm, F *req, F *ierr)
    __attribute__((alias("f_irecv")));

#pragma weak pmpi_wait_
void pmpi_wait_(F *, F *, F *);
static void f_wait(F *req, F *status, F *ierr)
{
    ENTER();
    F local[FSTATUS_LEN];
    MPI_Request r = PMPI_Request_f2c(*req);
    int track = OUTER && r != MPI_REQUEST_NULL && tracked((uintptr_t)r);
    F *st = (track && status == MPI_F_STATUS_IGNORE) ? local : status;
    pmpi_wait_(req, st, ierr);
    if (track && *ierr == MPI_SUCCESS) {
        MPI_Status cs;
        PMPI_Status_f2c(st, &cs);
        rt_complete((uintptr_t)r, &cs);
    }
    LEAVE(R_Wait);
}
FALIASES((F * req, F *status, F *ierr), f_wait, mpi_wait, MPI_WAIT)
void ompi_wait_f(F *req, F *status, F *ierr) __attribute__((alias("f_wait")));

#pragma weak pmpi_test_
void pmpi_test_(F *, F *, F *, F *);
static void f_test(F *req, F *flag, F *status, F *ierr)
{
    ENTER();
    F local[FSTATUS_LEN];
    MPI_Request r = PMPI_Request_f2c(*req);
    int track = OUTER && r != MPI_REQUEST_NULL && tracked((uintptr_t)r);
    F *st = (track && status == MPI_F_STATUS_IGNORE) ? local : status;
    pmpi_test_(req, flag, st, ierr);
    if (track && *ierr == MPI_SUCCESS && *flag) {
        MPI_Status cs;
        PMPI_Status_f2c(st, &cs);
        rt_complete((uintptr_t)r, &cs);
    }
    LEAVE(R_Test);
}
FALIASES((F * req, F *flag, F *status, F *ierr), f_test, mpi_test, MPI_TEST)
void ompi_test_f(F *req, F *flag, F *status, F *ierr) __attribute__((alias("f_test")));

#pragma weak pmpi_waitall_
void pmpi_waitall_(F *, F *, F *, F *);
static __thread F fst_scratch[PERFCAST_SCRATCH * sizeof(MPI_Status) / sizeof(MPI_Fint)];
static void f_waitall(F *count, F *reqs, F *statuses, F *ierr)
{
    ENTER();
    int n = *count, any = 0;
    MPI_Request hb[PERFCAST_SCRATCH], *h = hb;
    F *st = statuses;
    if (OUTER && n > 0) {
        if (n > PERFCAST_SCRATCH) h = malloc(sizeof(MPI_Request) * (size_t)n);
        if (h) {
            for (int i = 0; i < n; i++) {
                h[i] = PMPI_Request_f2c(reqs[i]);
                if (h[i] != MPI_REQUEST_NULL && tracked((uintptr_t)h[i])) any = 1;
            }
        }
        if (any && statuses == MPI_F_STATUSES_IGNORE) {
            st = n > PERFCAST_SCRATCH ? malloc(sizeof(F) * (size_t)FSTATUS_LEN * (size_t)n) : fst_scratch;
            if (!st) { st = statuses; any = 0; }
        }
    }
    pmpi_waitall_(count, reqs, st, ierr);
    if (any && *ierr == MPI_SUCCESS)
        for (int i = 0; i < n; i++)
            if (h[i] != MPI_REQUEST_NULL) {
                MPI_Status cs;
                PMPI_Status_f2c(st + (size_t)i * FSTATUS_LEN, &cs);
                rt_complete((uintptr_t)h[i], &cs);
            }
    if (h && h != hb) free(h);
    if (st != statuses && st != fst_scratch) free(st);
    LEAVE(R_Waitall);
}
FALIASES((F * count, F *reqs, F *statuses, F *ierr), f_waitall, mpi_waitall, MPI_WAITALL)
void ompi_waitall_f(F *count, F *reqs, F *statuses, F *ierr) __attribute__((alias("f_waitall")));

/* Fortran MPI_IN_PLACE is the address of a common block; compare with the names gfortran & co use */
#pragma weak mpi_fortran_in_place
#pragma weak mpi_fortran_in_place_
#pragma weak mpi_fortran_in_place__
#pragma weak MPI_FORTRAN_IN_PLACE
extern F mpi_fortran_in_place, mpi_fortran_in_place_, mpi_fortran_in_place__, MPI_FORTRAN_IN_PLACE;
static const void *f_inplace(const void *p)
{
    if (p && (p == (void *)&mpi_fortran_in_place_ || p == (void *)&mpi_fortran_in_place ||
              p == (void *)&mpi_fortran_in_place__ || p == (void *)&MPI_FORTRAN_IN_PLACE))
        return MPI_IN_PLACE;
    return p;
}

#pragma weak pmpi_barrier_
void pmpi_barrier_(F *, F *);
static void f_barrier(F *comm, F *ierr)
{
    ENTER();
    pmpi_barrier_(comm, ierr);
    if (OUTER) acc_coll(R_Barrier, 0, 0);
    LEAVE(R_Barrier);
}
FALIASES((F * comm, F *ierr), f_barrier, mpi_barrier, MPI_BARRIER)
void ompi_barrier_f(F *comm, F *ierr) __attribute__((alias("f_barrier")));

#pragma weak pmpi_bcast_
void pmpi_bcast_(char *, F *, F *, F *, F *, F *);
static void f_bcast(char *buf, F *count, F *type, F *root, F *comm, F *ierr)
{
    ENTER();
    pmpi_bcast_(buf, count, type, root, comm, ierr);
    if (OUTER) {
        io_t io = b_bcast(*count, PMPI_Type_f2c(*type), *root, PMPI_Comm_f2c(*comm));
        acc_coll(R_Bcast, io.sent, io.recv);
    }
    LEAVE(R_Bcast);
}
FALIASES((char *buf, F *count, F *type, F *root, F *comm, F *ierr), f_bcast, mpi_bcast, MPI_BCAST)
void ompi_bcast_f(char *buf, F *count, F *type, F *root, F *comm, F *ierr) __attribute__((alias("f_bcast")));

#pragma weak pmpi_reduce_
void pmpi_reduce_(char *, char *, F *, F *, F *, F *, F *, F *);
static void f_reduce(char *sb, char *rb, F *count, F *type, F *op, F *root, F *comm, F *ierr)
{
    ENTER();
    pmpi_reduce_(sb, rb, count, type, op, root, comm, ierr);
    if (OUTER) {
        io_t io = b_reduce(*count, PMPI_Type_f2c(*type), *root, PMPI_Comm_f2c(*comm));
        acc_coll(R_Reduce, io.sent, io.recv);
    }
    LEAVE(R_Reduce);
}
FALIASES((char *sb, char *rb, F *count, F *type, F *op, F *root, F *comm, F *ierr), f_reduce, mpi_reduce, MPI_REDUCE)
void ompi_reduce_f(char *sb, char *rb, F *count, F *type, F *op, F *root, F *comm, F *ierr)
    __attribute__((alias("f_reduce")));

#pragma weak pmpi_allreduce_
void pmpi_allreduce_(char *, char *, F *, F *, F *, F *, F *);
static void f_allreduce(char *sb, char *rb, F *count, F *type, F *op, F *comm, F *ierr)
{
    ENTER();
    pmpi_allreduce_(sb, rb, count, type, op, comm, ierr);
    if (OUTER) {
        io_t io = b_sym(*count, PMPI_Type_f2c(*type));
        acc_coll(R_Allreduce, io.sent, io.recv);
    }
    LEAVE(R_Allreduce);
}
FALIASES((char *sb, char *rb, F *count, F *type, F *op, F *comm, F *ierr), f_allreduce, mpi_allreduce, MPI_ALLREDUCE)
void ompi_allreduce_f(char *sb, char *rb, F *count, F *type, F *op, F *comm, F *ierr)
    __attribute__((alias("f_allreduce")));

#define F_GATHERLIKE(NAME, sh, SH, IO)                                                           \
    extern void pmpi_##sh##_(char *, F *, F *, char *, F *, F *, F *, F *, F *) __attribute__((weak));  \
    static void f_##sh(char *sb, F *sc, F *st, char *rb, F *rc, F *rt, F *root, F *comm, F *ierr)   \
    {                                                                                                  \
        ENTER();                                                                                       \
        pmpi_##sh##_(sb, sc, st, rb, rc, rt, root, comm, ierr);                                         \
        if (OUTER) {                                                                                   \
            MPI_Comm c = PMPI_Comm_f2c(*comm);                                                         \
            MPI_Datatype cst = PMPI_Type_f2c(*st), crt = PMPI_Type_f2c(*rt);                           \
            io_t io = IO;                                                                              \
            acc_coll(R_##NAME, io.sent, io.recv);                                                      \
        }                                                                                              \
        LEAVE(R_##NAME);                                                                               \
    }                                                                                                  \
    FALIASES((char *sb, F *sc, F *st, char *rb, F *rc, F *rt, F *root, F *comm, F *ierr), f_##sh, mpi_##sh, MPI_##SH) \
    void ompi_##sh##_f(char *sb, F *sc, F *st, char *rb, F *rc, F *rt, F *root, F *comm, F *ierr)  \
        __attribute__((alias("f_" #sh)));
F_GATHERLIKE(Gather, gather, GATHER, b_gather(f_inplace(sb), *sc, cst, *rc, crt, *root, c))
F_GATHERLIKE(Scatter, scatter, SCATTER, b_scatter(*sc, cst, f_inplace(rb), *rc, crt, *root, c))

#define F_ALLLIKE(NAME, sh, SH, IO)                                                              \
    extern void pmpi_##sh##_(char *, F *, F *, char *, F *, F *, F *, F *) __attribute__((weak));       \
    static void f_##sh(char *sb, F *sc, F *st, char *rb, F *rc, F *rt, F *comm, F *ierr)            \
    {                                                                                                  \
        ENTER();                                                                                       \
        pmpi_##sh##_(sb, sc, st, rb, rc, rt, comm, ierr);                                               \
        if (OUTER) {                                                                                   \
            MPI_Comm c = PMPI_Comm_f2c(*comm);                                                         \
            MPI_Datatype cst = PMPI_Type_f2c(*st), crt = PMPI_Type_f2c(*rt);                           \
            io_t io = IO;                                                                              \
            acc_coll(R_##NAME, io.sent, io.recv);                                                      \
        }                                                                                              \
        LEAVE(R_##NAME);                                                                               \
    }                                                                                                  \
    FALIASES((char *sb, F *sc, F *st, char *rb, F *rc, F *rt, F *comm, F *ierr), f_##sh, mpi_##sh, MPI_##SH) \
    void ompi_##sh##_f(char *sb, F *sc, F *st, char *rb, F *rc, F *rt, F *comm, F *ierr)           \
        __attribute__((alias("f_" #sh)));
F_ALLLIKE(Allgather, allgather, ALLGATHER, b_allgather(f_inplace(sb), *sc, cst, *rc, crt, c))
F_ALLLIKE(Alltoall, alltoall, ALLTOALL, b_alltoall(f_inplace(sb), *sc, cst, *rc, crt, c))
