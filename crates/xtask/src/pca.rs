//! Principal component analysis, small and exact: the covariance matrix in f64 and its
//! eigenvectors by cyclic Jacobi rotations.
//!
//! At a few hundred dimensions Jacobi converges in about ten sweeps of a second or so each,
//! is accurate to the last bits for symmetric matrices, and needs no linear-algebra crate.
//! Every step is sequential floating point in a fixed order, so the result is the same on
//! every run.

/// The principal axes of a set of rows.
#[derive(Debug, Clone)]
pub struct Pca {
    pub mean: Vec<f64>,
    /// Axes, strongest first; each is a unit vector of the input's width.
    pub axes: Vec<Vec<f64>>,
    /// The variance along each axis, in the same order.
    pub variances: Vec<f64>,
}

impl Pca {
    /// Fits the principal axes of `rows` (each `width` long), keeping all of them.
    pub fn fit<'a>(rows: impl Iterator<Item = &'a [f32]> + Clone, width: usize) -> Pca {
        let mut count = 0usize;
        let mut mean = vec![0.0f64; width];
        for row in rows.clone() {
            count += 1;
            for (total, &x) in mean.iter_mut().zip(row) {
                *total += f64::from(x);
            }
        }
        assert!(count > 1, "PCA needs at least two rows");
        mean.iter_mut().for_each(|total| *total /= count as f64);

        // Only the upper triangle is accumulated, then mirrored.
        let mut covariance = vec![0.0f64; width * width];
        let mut centred = vec![0.0f64; width];
        for row in rows {
            for ((c, &x), m) in centred.iter_mut().zip(row).zip(&mean) {
                *c = f64::from(x) - m;
            }
            for i in 0..width {
                let ci = centred[i];
                let out = &mut covariance[i * width..(i + 1) * width];
                for j in i..width {
                    out[j] += ci * centred[j];
                }
            }
        }
        for i in 0..width {
            for j in i..width {
                let value = covariance[i * width + j] / (count - 1) as f64;
                covariance[i * width + j] = value;
                covariance[j * width + i] = value;
            }
        }

        let (values, vectors) = symmetric_eigen(covariance, width);
        let mut order: Vec<usize> = (0..width).collect();
        order.sort_by(|&a, &b| values[b].total_cmp(&values[a]).then(a.cmp(&b)));
        let axes = order
            .iter()
            .map(|&k| {
                let mut axis: Vec<f64> = (0..width).map(|i| vectors[i * width + k]).collect();
                // An eigenvector's sign is arbitrary; fixing it (largest component positive)
                // makes the output independent of how the rotations happened to go.
                let largest = axis.iter().copied().fold(0.0f64, |best, x| if x.abs() > best.abs() { x } else { best });
                if largest < 0.0 {
                    axis.iter_mut().for_each(|x| *x = -*x);
                }
                axis
            })
            .collect();
        let variances = order.iter().map(|&k| values[k]).collect();
        Pca { mean, axes, variances }
    }

    /// `row` centred and projected on the first `dimensions` axes.
    pub fn project(&self, row: &[f32], dimensions: usize) -> Vec<f64> {
        self.axes[..dimensions]
            .iter()
            .map(|axis| axis.iter().zip(row).zip(&self.mean).map(|((a, &x), m)| a * (f64::from(x) - m)).sum())
            .collect()
    }

    /// The share of the total variance the first `dimensions` axes keep.
    pub fn explained(&self, dimensions: usize) -> f64 {
        self.variances[..dimensions].iter().sum::<f64>() / self.variances.iter().sum::<f64>()
    }
}

/// Eigenvalues and eigenvectors (the columns of the returned row-major matrix) of the symmetric
/// `n × n` matrix `a`, by cyclic Jacobi rotations.
fn symmetric_eigen(mut a: Vec<f64>, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut v = vec![0.0f64; n * n];
    for i in 0..n {
        v[i * n + i] = 1.0;
    }
    let scale: f64 = a.iter().map(|x| x * x).sum();
    for _sweep in 0..100 {
        let off_diagonal: f64 = (0..n).flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j))).map(|(i, j)| a[i * n + j].powi(2)).sum();
        if off_diagonal <= scale * 1e-30 {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                let apq = a[p * n + q];
                if apq == 0.0 {
                    continue;
                }
                // The rotation that zeroes a[p][q]: t = tan of its angle, the smaller root of
                // t² + 2θt − 1 = 0, which keeps the rotation small and the update stable.
                let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let (akp, akq) = (a[k * n + p], a[k * n + q]);
                    a[k * n + p] = c * akp - s * akq;
                    a[k * n + q] = s * akp + c * akq;
                }
                for k in 0..n {
                    let (apk, aqk) = (a[p * n + k], a[q * n + k]);
                    a[p * n + k] = c * apk - s * aqk;
                    a[q * n + k] = s * apk + c * aqk;
                }
                for k in 0..n {
                    let (vkp, vkq) = (v[k * n + p], v[k * n + q]);
                    v[k * n + p] = c * vkp - s * vkq;
                    v[k * n + q] = s * vkp + c * vkq;
                }
            }
        }
    }
    ((0..n).map(|i| a[i * n + i]).collect(), v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eigen_decomposition_reconstructs_the_matrix() {
        let n = 5;
        // A symmetric matrix with distinct eigenvalues, built from a fixed pattern.
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = 1.0 / (1.0 + i as f64 + j as f64) + if i == j { i as f64 } else { 0.0 };
            }
        }
        let (values, vectors) = symmetric_eigen(a.clone(), n);
        for i in 0..n {
            for j in 0..n {
                let rebuilt: f64 = (0..n).map(|k| vectors[i * n + k] * values[k] * vectors[j * n + k]).sum();
                assert!((rebuilt - a[i * n + j]).abs() < 1e-12, "entry ({i}, {j}): {rebuilt} vs {}", a[i * n + j]);
            }
        }
        for k in 0..n {
            let norm: f64 = (0..n).map(|i| vectors[i * n + k].powi(2)).sum();
            assert!((norm - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn the_first_axis_follows_the_spread_of_the_data() {
        // Points along the direction (3, 4)/5 with a little noise across it.
        let rows: Vec<[f32; 2]> = (0..50)
            .map(|i| {
                let along = i as f32 - 25.0;
                let across = if i % 2 == 0 { 0.1 } else { -0.1 };
                [0.6 * along - 0.8 * across + 7.0, 0.8 * along + 0.6 * across - 2.0]
            })
            .collect();
        let pca = Pca::fit(rows.iter().map(|row| row.as_slice()), 2);
        assert!((pca.mean[0] - 6.7).abs() < 1e-4 && (pca.mean[1] + 2.4).abs() < 1e-4, "{:?}", pca.mean);
        assert!((pca.axes[0][0] - 0.6).abs() < 1e-3 && (pca.axes[0][1] - 0.8).abs() < 1e-3, "{:?}", pca.axes[0]);
        assert!(pca.variances[0] > 100.0 * pca.variances[1]);
        assert!(pca.explained(1) > 0.99);
        let projected = pca.project(&[6.7 + 0.6, -2.4 + 0.8], 1);
        assert!((projected[0] - 1.0).abs() < 1e-3, "{projected:?}");
    }
}
