/* Shared declarations for the qrbench harness (internal to the harness). */
#ifndef QRBENCH_HARNESS_H
#define QRBENCH_HARNESS_H

/* Same algorithm and interface as the campaign's initial kernel; used as the
 * timing baseline and as the float64 reference output. */
void qrbench_baseline_qr(int batch, int m, int n, const double *A, double *Q, double *R);

/* Householder QR of ONE m x n column-major matrix carried out in long double.
 * Writes the thin factor q (m x n, column-major) and r (n x n, column-major,
 * zeros below the diagonal). */
void qrbench_hiprec_qr(int m, int n, const double *a, long double *q, long double *r);

#endif
