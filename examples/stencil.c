/* examples/stencil.c — a balanced code: a 2-D Jacobi stencil on a periodic grid of ranks.
 * Every rank owns an N x N block of the field (the same work everywhere), exchanges its
 * four halo edges with its four neighbours (MPI_Sendrecv along each dimension; the grid is
 * periodic, so every rank has four neighbours, even on one or two ranks per dimension),
 * updates its block with the five-point average (real arithmetic, no sleeping) and joins
 * an MPI_Allreduce of the largest change every iteration, as a solver checks convergence.
 * No rank is late and none waits for another more than the others: a profile of it must
 * name no outlier.
 *
 *   mpirun -np P ./stencil ITERATIONS N
 *
 * Prints nothing; exits 0 (2 on bad arguments). */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

/* The field with one halo cell on every side: row-major, (n + 2) x (n + 2). */
#define AT(f, i, j) (f)[(size_t)(i) * (size_t)(n + 2) + (size_t)(j)]

/* Exchanges the four halo edges of `f` with the neighbours of `grid`. */
static void exchange(double *f, int n, MPI_Comm grid, MPI_Datatype column)
{
    int up, down, left, right;
    MPI_Cart_shift(grid, 0, 1, &up, &down);
    MPI_Cart_shift(grid, 1, 1, &left, &right);
    /* rows are contiguous: the first and last owned rows go up and down */
    MPI_Sendrecv(&AT(f, 1, 1), n, MPI_DOUBLE, up, 0, &AT(f, n + 1, 1), n, MPI_DOUBLE, down, 0,
                 grid, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&AT(f, n, 1), n, MPI_DOUBLE, down, 1, &AT(f, 0, 1), n, MPI_DOUBLE, up, 1, grid,
                 MPI_STATUS_IGNORE);
    /* columns are strided: one vector type */
    MPI_Sendrecv(&AT(f, 1, 1), 1, column, left, 2, &AT(f, 1, n + 1), 1, column, right, 2, grid,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(&AT(f, 1, n), 1, column, right, 3, &AT(f, 1, 0), 1, column, left, 3, grid,
                 MPI_STATUS_IGNORE);
}

/* One Jacobi sweep from `f` into `g`; the largest change of a cell. */
static double sweep(const double *f, double *g, int n)
{
    double most = 0;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= n; j++) {
            double v = 0.25 * (AT(f, i - 1, j) + AT(f, i + 1, j) + AT(f, i, j - 1) +
                               AT(f, i, j + 1));
            double change = fabs(v - AT(f, i, j));
            if (change > most)
                most = change;
            AT(g, i, j) = v;
        }
    return most;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int iterations = argc == 3 ? atoi(argv[1]) : 0, n = argc == 3 ? atoi(argv[2]) : 0;
    if (iterations <= 0 || n <= 0)
        MPI_Abort(MPI_COMM_WORLD, 2);
    int size, rank, dims[2] = { 0, 0 }, periods[2] = { 1, 1 };
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Dims_create(size, 2, dims);
    MPI_Comm grid;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    MPI_Comm_rank(grid, &rank);
    MPI_Datatype column;
    MPI_Type_vector(n, 1, n + 2, MPI_DOUBLE, &column);
    MPI_Type_commit(&column);
    size_t cells = (size_t)(n + 2) * (size_t)(n + 2);
    double *f = calloc(cells, sizeof *f), *g = calloc(cells, sizeof *g);
    if (!f || !g)
        MPI_Abort(MPI_COMM_WORLD, 3);
    for (int i = 1; i <= n; i++) /* the same start on every rank: a smooth bump */
        for (int j = 1; j <= n; j++)
            AT(f, i, j) = AT(g, i, j) = sin(3.14159265358979 * i / (n + 1)) *
                                        sin(3.14159265358979 * j / (n + 1));
    for (int it = 0; it < iterations; it++) {
        exchange(f, n, grid, column);
        double local = sweep(f, g, n), most;
        MPI_Allreduce(&local, &most, 1, MPI_DOUBLE, MPI_MAX, grid);
        double *swap = f;
        f = g, g = swap;
    }
    free(f), free(g);
    MPI_Type_free(&column);
    MPI_Comm_free(&grid);
    MPI_Finalize();
    return 0;
}
