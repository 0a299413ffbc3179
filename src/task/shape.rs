//! Geometric primitives of a task's TRUE constraint (and of regions the dynamics block): ellipsoid,
//! vertical cylinder, box, per-axis velocity limits, half-space (a wall in any dimension). They live in the constraint's feature space
//! psi(s, a). Only simulation, expert demonstrations and evaluation use them, never the learner.
use crate::geometry::norm;
use nalgebra::{DMatrix, Rotation2, Rotation3};
use serde::{Deserialize, Serialize};

/// A primitive as written in a task file. `kind` selects the variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum PrimitiveSpec {
    /// Infeasible inside. Either `covariance` + `bound` (infeasible iff (x-c)^T Sigma^-1 (x-c) <= bound)
    /// or `semi_axes` + optional `rotation_deg` (2-D: an angle, `30` or `[30]`; 3-D: [roll, pitch, yaw]).
    Ellipsoid {
        center: Vec<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        covariance: Option<Vec<Vec<f64>>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bound: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        semi_axes: Option<Vec<f64>>,
        #[serde(
            default,
            deserialize_with = "angle_or_angles",
            skip_serializing_if = "Option::is_none"
        )]
        rotation_deg: Option<Vec<f64>>,
    },
    /// Vertical cylinder: infeasible iff (x-cx)^2 + (y-cy)^2 < radius^2 and z within `z_range`
    /// (any z when absent). Uses feature 0 and 1 as x and y, feature 2 as z.
    Cylinder {
        center: [f64; 2],
        radius: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        z_range: Option<[f64; 2]>,
    },
    /// Box with `half_extents` around `center`, axis-aligned unless `rotation_deg` is given.
    Box {
        center: Vec<f64>,
        half_extents: Vec<f64>,
        #[serde(
            default,
            deserialize_with = "angle_or_angles",
            skip_serializing_if = "Option::is_none"
        )]
        rotation_deg: Option<Vec<f64>>,
    },
    /// Infeasible iff |x_i| > max_abs[i] for any i (`null` leaves an axis unbounded) or, with
    /// `max_norm`, iff the command's Euclidean norm exceeds it (a speed limit in every direction).
    VelocityLimit {
        max_abs: Vec<Option<f64>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_norm: Option<f64>,
    },
    /// Infeasible iff normal . x <= at_most over the first normal.len() features (the blocked
    /// half-cheetah's wall: normal [1], at_most -3).
    HalfSpace { normal: Vec<f64>, at_most: f64 },
}

/// A compiled primitive: matrices precomputed, tests allocation-free.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Ellipsoid {
        center: Vec<f64>,
        /// Row-major precision P: infeasible iff (x-c)^T P (x-c) <= 1.
        precision: Vec<f64>,
        /// Columns are the principal directions (row-major storage), one per semi-axis.
        axes: Vec<f64>,
        semi_axes: Vec<f64>,
        /// Points within this Euclidean distance of the ellipsoid count as inside (an inflated ellipsoid
        /// is not an ellipsoid, so the margin is kept exactly).
        margin: f64,
    },
    Cylinder {
        center: [f64; 2],
        radius: f64,
        z_range: Option<[f64; 2]>,
    },
    Box {
        center: Vec<f64>,
        axes: Vec<f64>,
        half_extents: Vec<f64>,
    },
    VelocityLimit {
        max_abs: Vec<f64>,
        /// Infinite without a norm limit.
        max_norm: f64,
    },
    HalfSpace {
        normal: Vec<f64>,
        at_most: f64,
    },
}

/// Primitives as written (`true_constraint`, `blocking`). Serde's internally tagged enums buffer a
/// primitive's fields, and a type error in one of them loses the field's name ("invalid type:
/// floating point `0.1`, expected a sequence"); the field at fault is found by reading each field
/// alone and named in the error, which stays at the primitive's line.
pub(crate) fn primitives<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<PrimitiveSpec>, D::Error> {
    struct Written(PrimitiveSpec);
    impl<'de> Deserialize<'de> for Written {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            // Read inside the primitive's own mapping, so that the error is marked at its line.
            d.deserialize_map(Primitive).map(Written)
        }
    }
    struct Primitive;
    impl<'de> serde::de::Visitor<'de> for Primitive {
        type Value = PrimitiveSpec;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a primitive: a mapping with its `kind`")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            map: A,
        ) -> Result<PrimitiveSpec, A::Error> {
            use serde::de::Error;
            let deserializer = serde::de::value::MapAccessDeserializer::new(map);
            let value = serde_yaml_ng::Value::deserialize(deserializer)?;
            PrimitiveSpec::deserialize(&value)
                .map_err(|e| A::Error::custom(field_at_fault(&value, e)))
        }
    }
    Ok(Vec::<Written>::deserialize(d)?
        .into_iter()
        .map(|w| w.0)
        .collect())
}

/// `e`, read from primitive `value`, with the field it is about named where its text does not.
fn field_at_fault(value: &serde_yaml_ng::Value, e: serde_yaml_ng::Error) -> String {
    let text = e.to_string();
    let (Some(fields), Some(kind)) = (value.as_mapping(), value.get("kind")) else {
        return text;
    };
    // Read with `kind` and at most one field: anything but a missing other field is an error of
    // the kind or of that field.
    let faulty = |field: Option<(&serde_yaml_ng::Value, &serde_yaml_ng::Value)>| {
        let mut alone = serde_yaml_ng::Mapping::new();
        alone.insert("kind".into(), kind.clone());
        if let Some((key, v)) = field {
            alone.insert(key.clone(), v.clone());
        }
        PrimitiveSpec::deserialize(serde_yaml_ng::Value::Mapping(alone))
            .err()
            .is_some_and(|e| !e.to_string().starts_with("missing field"))
    };
    if faulty(None) {
        return text;
    }
    for (key, field) in fields {
        let Some(name) = key.as_str().filter(|k| *k != "kind") else {
            continue;
        };
        if faulty(Some((key, field))) && !text.contains(&format!("`{name}`")) {
            return format!("`{name}`: {text}");
        }
    }
    text
}

/// `rotation_deg` as written: a list, or one number (a planar angle, as `25` reads; a 3-D
/// primitive then says it takes three).
fn angle_or_angles<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<f64>>, D::Error> {
    struct Angles;
    impl<'de> serde::de::Visitor<'de> for Angles {
        type Value = Option<Vec<f64>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an angle in degrees or a list of them ([roll, pitch, yaw] in 3-D)")
        }
        fn visit_f64<E>(self, a: f64) -> Result<Self::Value, E> {
            Ok(Some(vec![a]))
        }
        fn visit_i64<E>(self, a: i64) -> Result<Self::Value, E> {
            Ok(Some(vec![a as f64]))
        }
        fn visit_u64<E>(self, a: u64) -> Result<Self::Value, E> {
            Ok(Some(vec![a as f64]))
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut v = Vec::new();
            while let Some(a) = seq.next_element::<f64>()? {
                v.push(a);
            }
            Ok(Some(v))
        }
    }
    d.deserialize_any(Angles)
}

/// A primitive's rotation: the identity without `rotation_deg`.
fn rotation_or_identity(dim: usize, deg: Option<&[f64]>) -> Result<DMatrix<f64>, String> {
    match deg {
        Some(d) => {
            finite("rotation_deg", d)?;
            rotation(dim, d)
        }
        None => Ok(DMatrix::identity(dim, dim)),
    }
}

fn rotation(dim: usize, deg: &[f64]) -> Result<DMatrix<f64>, String> {
    match (dim, deg.len()) {
        (2, 1) => {
            let r = Rotation2::new(deg[0].to_radians());
            Ok(DMatrix::from_iterator(2, 2, r.matrix().iter().copied()))
        }
        (3, 3) => {
            let r = Rotation3::from_euler_angles(
                deg[0].to_radians(),
                deg[1].to_radians(),
                deg[2].to_radians(),
            );
            Ok(DMatrix::from_iterator(3, 3, r.matrix().iter().copied()))
        }
        (d, n) => Err(format!(
            "rotation_deg has {n} values; a {d}-D primitive takes {}",
            if d == 2 {
                "1 (angle)"
            } else if d == 3 {
                "3 (roll, pitch, yaw)"
            } else {
                "none"
            }
        )),
    }
}

fn row_major(m: &DMatrix<f64>) -> Vec<f64> {
    let mut v = Vec::with_capacity(m.len());
    for i in 0..m.nrows() {
        for j in 0..m.ncols() {
            v.push(m[(i, j)]);
        }
    }
    v
}

fn finite(name: &str, v: &[f64]) -> Result<(), String> {
    match v.iter().position(|x| !x.is_finite()) {
        Some(i) => Err(format!("{name}[{i}] is not a finite number")),
        None => Ok(()),
    }
}

fn positive(name: &str, v: &[f64]) -> Result<(), String> {
    finite(name, v)?;
    match v.iter().position(|x| *x <= 0.0) {
        Some(i) => Err(format!("{name}[{i}] must be > 0")),
        None => Ok(()),
    }
}

impl PrimitiveSpec {
    /// Compile and validate; the error says which field is wrong.
    pub fn compile(&self) -> Result<Shape, String> {
        match self {
            PrimitiveSpec::Ellipsoid {
                center,
                covariance,
                bound,
                semi_axes,
                rotation_deg,
            } => {
                let n = center.len();
                finite("center", center)?;
                if !(2..=8).contains(&n) {
                    return Err("ellipsoid center needs 2 to 8 values".into());
                }
                match (covariance, bound, semi_axes) {
                    (Some(cov), Some(b), None) => {
                        if rotation_deg.is_some() {
                            return Err("rotation_deg goes with semi_axes, not covariance".into());
                        }
                        if !(b.is_finite() && *b > 0.0) {
                            return Err("bound must be a finite number > 0".into());
                        }
                        if cov.len() != n || cov.iter().any(|r| r.len() != n) {
                            return Err(format!("covariance must be {n}x{n} like center"));
                        }
                        let flat: Vec<f64> = cov.iter().flatten().copied().collect();
                        finite("covariance", &flat)?;
                        let m = DMatrix::from_row_slice(n, n, &flat);
                        if (&m - m.transpose()).amax() > 1e-12 * m.amax().max(1.0) {
                            return Err("covariance must be symmetric".into());
                        }
                        let eig = m.clone().symmetric_eigen();
                        if eig.eigenvalues.iter().any(|l| *l <= 0.0) {
                            return Err("covariance must be positive definite".into());
                        }
                        let inv = m.try_inverse().ok_or("covariance is singular")? / *b;
                        let semi: Vec<f64> = eig.eigenvalues.iter().map(|l| (l * b).sqrt()).collect();
                        Ok(Shape::Ellipsoid {
                            center: center.clone(),
                            precision: row_major(&inv),
                            axes: row_major(&eig.eigenvectors),
                            semi_axes: semi,
                            margin: 0.0,
                        })
                    }
                    (None, None, Some(semi)) => {
                        if semi.len() != n {
                            return Err(format!("semi_axes must have {n} values like center"));
                        }
                        positive("semi_axes", semi)?;
                        let r = rotation_or_identity(n, rotation_deg.as_deref())?;
                        Ok(Shape::ellipsoid_from_axes(center.clone(), row_major(&r), semi.clone()))
                    }
                    _ => Err("an ellipsoid takes either covariance and bound, or semi_axes (and rotation_deg)".into()),
                }
            }
            PrimitiveSpec::Cylinder {
                center,
                radius,
                z_range,
            } => {
                finite("center", center)?;
                if !(radius.is_finite() && *radius > 0.0) {
                    return Err("radius must be a finite number > 0".into());
                }
                if let Some([lo, hi]) = z_range {
                    finite("z_range", &[*lo, *hi])?;
                    if lo >= hi {
                        return Err("z_range must be [low, high] with low < high".into());
                    }
                }
                Ok(Shape::Cylinder {
                    center: *center,
                    radius: *radius,
                    z_range: *z_range,
                })
            }
            PrimitiveSpec::Box {
                center,
                half_extents,
                rotation_deg,
            } => {
                let n = center.len();
                finite("center", center)?;
                if half_extents.len() != n {
                    return Err(format!("half_extents must have {n} values like center"));
                }
                positive("half_extents", half_extents)?;
                let r = rotation_or_identity(n, rotation_deg.as_deref())?;
                Ok(Shape::Box {
                    center: center.clone(),
                    axes: row_major(&r),
                    half_extents: half_extents.clone(),
                })
            }
            PrimitiveSpec::VelocityLimit { max_abs, max_norm } => {
                if max_abs.is_empty() {
                    return Err("max_abs needs one value (or null) per axis".into());
                }
                let v: Vec<f64> = max_abs.iter().map(|m| m.unwrap_or(f64::INFINITY)).collect();
                if v.iter().any(|m| m.is_nan() || *m <= 0.0) {
                    return Err("max_abs values must be > 0 (or null for no limit)".into());
                }
                let max_norm = max_norm.unwrap_or(f64::INFINITY);
                if max_norm.is_nan() || max_norm <= 0.0 {
                    return Err(format!("max_norm must be > 0, got {max_norm}"));
                }
                Ok(Shape::VelocityLimit {
                    max_abs: v,
                    max_norm,
                })
            }
            PrimitiveSpec::HalfSpace { normal, at_most } => {
                finite("normal", normal)?;
                if normal.iter().all(|v| *v == 0.0) {
                    return Err("normal needs at least one non-zero value".into());
                }
                finite("at_most", &[*at_most])?;
                Ok(Shape::HalfSpace {
                    normal: normal.clone(),
                    at_most: *at_most,
                })
            }
        }
    }
}

impl Shape {
    fn ellipsoid_from_axes(center: Vec<f64>, axes: Vec<f64>, semi_axes: Vec<f64>) -> Shape {
        let n = center.len();
        let mut precision = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                precision[i * n + j] = (0..n)
                    .map(|k| axes[i * n + k] * axes[j * n + k] / (semi_axes[k] * semi_axes[k]))
                    .sum();
            }
        }
        Shape::Ellipsoid {
            center,
            precision,
            axes,
            semi_axes,
            margin: 0.0,
        }
    }

    /// How many feature components the primitive reads (the feature space must have at least this many).
    pub fn dim(&self) -> usize {
        match self {
            Shape::Ellipsoid { center, .. } | Shape::Box { center, .. } => center.len(),
            Shape::Cylinder { z_range, .. } => {
                if z_range.is_some() {
                    3
                } else {
                    2
                }
            }
            Shape::VelocityLimit { max_abs, .. } => max_abs.len(),
            Shape::HalfSpace { normal, .. } => normal.len(),
        }
    }

    /// Whether the primitive needs exactly `dim()` features (cylinders only read the first 2 or 3,
    /// a half-space the first normal.len()).
    pub fn exact_dim(&self) -> bool {
        !matches!(self, Shape::Cylinder { .. } | Shape::HalfSpace { .. })
    }

    /// True where the constraint is violated (the point is infeasible).
    pub fn contains(&self, x: &[f64]) -> bool {
        match self {
            Shape::Ellipsoid {
                center,
                precision,
                axes,
                semi_axes,
                margin,
            } => {
                let q = quad_form(center, precision, x);
                if q <= 1.0 {
                    return true;
                }
                if *margin <= 0.0 {
                    return false;
                }
                // Cheap rejection: outside the ellipsoid scaled by (1 + margin / a_min), which contains
                // every point within `margin` (support-function bound).
                let a_min = semi_axes.iter().copied().fold(f64::INFINITY, f64::min);
                if q > (1.0 + margin / a_min).powi(2) {
                    return false;
                }
                ellipsoid_distance(center, axes, semi_axes, x) < *margin
            }
            Shape::Cylinder {
                center,
                radius,
                z_range,
            } => {
                let (dx, dy) = (x[0] - center[0], x[1] - center[1]);
                dx * dx + dy * dy < radius * radius
                    && z_range.is_none_or(|[lo, hi]| x[2] >= lo && x[2] <= hi)
            }
            Shape::Box {
                center,
                axes,
                half_extents,
            } => {
                let n = center.len();
                (0..n).all(|k| local(center, axes, x, k).abs() <= half_extents[k])
            }
            Shape::VelocityLimit { max_abs, max_norm } => {
                x.iter().zip(max_abs).any(|(v, m)| v.abs() > *m)
                    || (max_norm.is_finite() && norm(&x[..max_abs.len().min(x.len())]) > *max_norm)
            }
            Shape::HalfSpace { normal, at_most } => {
                normal.iter().zip(x).map(|(n, v)| n * v).sum::<f64>() <= *at_most
            }
        }
    }

    /// The same primitive grown by `margin` (for a velocity limit: the limits shrunk), so that a point
    /// feasible for the grown shape lies at least `margin` from the original infeasible set.
    pub fn inflate(&self, margin: f64) -> Shape {
        match self {
            Shape::Ellipsoid {
                center,
                precision,
                axes,
                semi_axes,
                margin: m,
            } => Shape::Ellipsoid {
                center: center.clone(),
                precision: precision.clone(),
                axes: axes.clone(),
                semi_axes: semi_axes.clone(),
                margin: m + margin,
            },
            Shape::Cylinder {
                center,
                radius,
                z_range,
            } => Shape::Cylinder {
                center: *center,
                radius: radius + margin,
                z_range: z_range.map(|[lo, hi]| [lo - margin, hi + margin]),
            },
            Shape::Box {
                center,
                axes,
                half_extents,
            } => Shape::Box {
                center: center.clone(),
                axes: axes.clone(),
                half_extents: half_extents.iter().map(|h| h + margin).collect(),
            },
            Shape::VelocityLimit { max_abs, max_norm } => Shape::VelocityLimit {
                max_abs: max_abs.iter().map(|m| (m - margin).max(0.0)).collect(),
                max_norm: (max_norm - margin).max(0.0),
            },
            Shape::HalfSpace { normal, at_most } => Shape::HalfSpace {
                normal: normal.clone(),
                at_most: at_most + margin * norm(normal),
            },
        }
    }

    /// Move a point that lies inside onto the boundary (used by dynamics that block a region, like the
    /// velocity task's obstacle). Points outside are left alone.
    pub fn project_out(&self, x: &mut [f64]) {
        if !self.contains(x) {
            return;
        }
        match self {
            Shape::Ellipsoid {
                center,
                precision,
                axes,
                semi_axes,
                ..
            } => {
                let n = center.len();
                let q = quad_form(center, precision, x);
                if q < 1e-300 {
                    // At the centre: leave along the first principal direction.
                    for i in 0..n {
                        x[i] = center[i] + axes[i * n] * semi_axes[0];
                    }
                } else {
                    let s = 1.0 / q.sqrt();
                    for i in 0..n {
                        x[i] = center[i] + (x[i] - center[i]) * s;
                    }
                }
            }
            Shape::Cylinder { center, radius, .. } => {
                let (dx, dy) = (x[0] - center[0], x[1] - center[1]);
                let r = (dx * dx + dy * dy).sqrt();
                if r < 1e-300 {
                    x[0] = center[0] + radius;
                } else {
                    x[0] = center[0] + dx * radius / r;
                    x[1] = center[1] + dy * radius / r;
                }
            }
            Shape::Box {
                center,
                axes,
                half_extents,
            } => {
                let n = center.len();
                let (mut best, mut slack, mut sign) = (0, f64::INFINITY, 1.0);
                for (k, h) in half_extents.iter().enumerate() {
                    let l = local(center, axes, x, k);
                    if h - l.abs() < slack {
                        (best, slack, sign) = (k, h - l.abs(), if l >= 0.0 { 1.0 } else { -1.0 });
                    }
                }
                let shift = sign * slack;
                for i in 0..n {
                    x[i] += axes[i * n + best] * shift;
                }
            }
            Shape::VelocityLimit { max_abs, max_norm } => {
                // The nearest feasible command, the projection onto box and ball: by the KKT
                // conditions y_i = clamp(s x_i, -m_i, m_i) with the largest s in (0, 1] whose y
                // is within the norm limit (|y| grows with s, so bisection finds it).
                let k = max_abs.len().min(x.len());
                let shown = x[..k].to_vec();
                let clamped = |s: f64, y: &mut [f64]| {
                    for i in 0..k {
                        y[i] = (s * shown[i]).clamp(-max_abs[i], max_abs[i]);
                    }
                };
                clamped(1.0, x);
                if norm(&x[..k]) > *max_norm {
                    let (mut lo, mut hi) = (0.0, 1.0);
                    for _ in 0..100 {
                        let mid = 0.5 * (lo + hi);
                        clamped(mid, x);
                        if norm(&x[..k]) > *max_norm {
                            hi = mid;
                        } else {
                            lo = mid;
                        }
                    }
                    clamped(lo, x);
                }
            }
            Shape::HalfSpace { normal, at_most } => {
                let n2 = norm(normal).powi(2);
                let gap = at_most - normal.iter().zip(&*x).map(|(n, v)| n * v).sum::<f64>();
                for (v, n) in x.iter_mut().zip(normal) {
                    *v += n * gap / n2;
                }
            }
        }
    }

    /// Axis-aligned bounding box of the infeasible set over the first `dim` features (infinite where
    /// the set is unbounded).
    pub fn aabb(&self, dim: usize) -> (Vec<f64>, Vec<f64>) {
        let mut lo = vec![f64::NEG_INFINITY; dim];
        let mut hi = vec![f64::INFINITY; dim];
        match self {
            Shape::Ellipsoid {
                center,
                axes,
                semi_axes,
                margin,
                ..
            } => {
                let n = center.len();
                for i in 0..n.min(dim) {
                    let h = (0..n)
                        .map(|k| (axes[i * n + k] * semi_axes[k]).powi(2))
                        .sum::<f64>()
                        .sqrt()
                        + margin;
                    lo[i] = center[i] - h;
                    hi[i] = center[i] + h;
                }
            }
            Shape::Box {
                center,
                axes,
                half_extents,
            } => {
                let n = center.len();
                for i in 0..n.min(dim) {
                    let h = (0..n)
                        .map(|k| (axes[i * n + k] * half_extents[k]).abs())
                        .sum::<f64>();
                    lo[i] = center[i] - h;
                    hi[i] = center[i] + h;
                }
            }
            Shape::Cylinder {
                center,
                radius,
                z_range,
            } => {
                for i in 0..2.min(dim) {
                    lo[i] = center[i] - radius;
                    hi[i] = center[i] + radius;
                }
                if let (Some([a, b]), true) = (z_range, dim > 2) {
                    lo[2] = *a;
                    hi[2] = *b;
                }
            }
            Shape::VelocityLimit { .. } => {}
            Shape::HalfSpace { normal, at_most } => {
                // Bounded only along an axis-aligned normal.
                let nonzero: Vec<usize> = (0..normal.len()).filter(|&i| normal[i] != 0.0).collect();
                if let [i] = nonzero[..]
                    && i < dim
                {
                    if normal[i] > 0.0 {
                        hi[i] = at_most / normal[i];
                    } else {
                        lo[i] = at_most / normal[i];
                    }
                }
            }
        }
        (lo, hi)
    }
}

/// Coordinate k of x in the primitive's own frame (axes stored row-major, columns = directions).
#[inline]
fn local(center: &[f64], axes: &[f64], x: &[f64], k: usize) -> f64 {
    let n = center.len();
    (0..n).map(|i| axes[i * n + k] * (x[i] - center[i])).sum()
}

/// Euclidean distance from an outside point to an ellipsoid (Eberly's method: bisection on the
/// Lagrange multiplier t of the closest point y*_i = a_i^2 y_i / (t + a_i^2)).
fn ellipsoid_distance(center: &[f64], axes: &[f64], semi_axes: &[f64], x: &[f64]) -> f64 {
    let n = center.len();
    let mut y = [0.0f64; 8];
    let y = &mut y[..n.min(8)];
    for (k, yk) in y.iter_mut().enumerate() {
        *yk = local(center, axes, x, k).abs();
    }
    let f = |t: f64| {
        y.iter()
            .zip(semi_axes)
            .map(|(yi, a)| (a * yi / (t + a * a)).powi(2))
            .sum::<f64>()
            - 1.0
    };
    let norm = y.iter().map(|v| v * v).sum::<f64>().sqrt();
    let a_max = semi_axes.iter().copied().fold(0.0, f64::max);
    let (mut lo, mut hi) = (0.0, a_max * norm);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if f(mid) > 0.0 {
            lo = mid
        } else {
            hi = mid
        }
        if hi - lo <= 1e-15 * hi.max(1e-300) {
            break;
        }
    }
    let t = 0.5 * (lo + hi);
    y.iter()
        .zip(semi_axes)
        .map(|(yi, a)| (yi - a * a * yi / (t + a * a)).powi(2))
        .sum::<f64>()
        .sqrt()
}

#[inline]
fn quad_form(center: &[f64], precision: &[f64], x: &[f64]) -> f64 {
    let n = center.len();
    let mut q = 0.0;
    for i in 0..n {
        let di = x[i] - center[i];
        for j in 0..n {
            q += di * precision[i * n + j] * (x[j] - center[j]);
        }
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ell(center: Vec<f64>, semi: Vec<f64>, rot: Option<Vec<f64>>) -> Shape {
        PrimitiveSpec::Ellipsoid {
            center,
            covariance: None,
            bound: None,
            semi_axes: Some(semi),
            rotation_deg: rot,
        }
        .compile()
        .unwrap()
    }

    #[test]
    fn covariance_ellipse_matches_reference_semi_axes() {
        // REFERENCE.md: Sigma1 = [[1.3,-0.8],[-0.8,1.8]]/80 with bound 5 has semi-axes 0.386 and 0.211.
        let s = PrimitiveSpec::Ellipsoid {
            center: vec![0.82, 1.0],
            covariance: Some(vec![
                vec![1.3 / 80.0, -0.8 / 80.0],
                vec![-0.8 / 80.0, 1.8 / 80.0],
            ]),
            bound: Some(5.0),
            semi_axes: None,
            rotation_deg: None,
        }
        .compile()
        .unwrap();
        let Shape::Ellipsoid { mut semi_axes, .. } = s.clone() else {
            panic!()
        };
        semi_axes.sort_by(f64::total_cmp);
        assert!(
            (semi_axes[0] - 0.211).abs() < 1e-3 && (semi_axes[1] - 0.386).abs() < 1e-3,
            "{semi_axes:?}"
        );
        assert!(s.contains(&[0.82, 1.0]));
        assert!(!s.contains(&[0.82 + 0.25, 1.0]));
    }

    #[test]
    fn rotated_ellipse_contains_points_along_its_rotated_major_axis() {
        let e = ell(vec![0.0, 0.0], vec![1.0, 0.1], Some(vec![90.0]));
        assert!(e.contains(&[0.0, 0.9]));
        assert!(!e.contains(&[0.9, 0.0]));
    }

    #[test]
    fn cylinder_is_strict_and_respects_z_range() {
        let c = PrimitiveSpec::Cylinder {
            center: [0.55, 0.0],
            radius: 0.04,
            z_range: Some([0.0, 0.1]),
        }
        .compile()
        .unwrap();
        assert!(c.contains(&[0.55, 0.039, 0.05]));
        assert!(!c.contains(&[0.55, 0.04, 0.05]));
        assert!(!c.contains(&[0.55, 0.0, 0.2]));
    }

    #[test]
    fn a_bad_rotation_is_an_error_naming_rotation_deg_for_ellipsoids_and_boxes() {
        for (rot, says) in [
            (
                vec![10.0],
                "rotation_deg has 1 values; a 3-D primitive takes 3",
            ),
            (
                vec![0.0, f64::NAN, 0.0],
                "rotation_deg[1] is not a finite number",
            ),
        ] {
            let ellipsoid = PrimitiveSpec::Ellipsoid {
                center: vec![0.0; 3],
                covariance: None,
                bound: None,
                semi_axes: Some(vec![1.0; 3]),
                rotation_deg: Some(rot.clone()),
            };
            let cuboid = PrimitiveSpec::Box {
                center: vec![0.0; 3],
                half_extents: vec![1.0; 3],
                rotation_deg: Some(rot),
            };
            for spec in [ellipsoid, cuboid] {
                let e = spec.compile().unwrap_err();
                assert!(e.contains(says), "{e}");
            }
        }
    }

    #[test]
    fn rotated_box_and_projection_onto_nearest_face() {
        let b = PrimitiveSpec::Box {
            center: vec![0.0, 0.0, 0.0],
            half_extents: vec![1.0, 0.5, 0.2],
            rotation_deg: Some(vec![0.0, 0.0, 90.0]),
        }
        .compile()
        .unwrap();
        assert!(b.contains(&[0.0, 0.9, 0.0]));
        assert!(!b.contains(&[0.9, 0.0, 0.0]));
        let mut p = [0.0, 0.0, 0.1];
        b.project_out(&mut p);
        assert!((p[2] - 0.2).abs() < 1e-12 && p[0].abs() < 1e-12, "{p:?}");
    }

    #[test]
    fn inflation_keeps_margin_for_every_shape() {
        let shapes = [
            ell(
                vec![0.0, 0.0, 0.0],
                vec![0.3, 0.1, 0.2],
                Some(vec![10.0, 20.0, 30.0]),
            ),
            PrimitiveSpec::Cylinder {
                center: [0.0, 0.0],
                radius: 0.1,
                z_range: Some([-0.1, 0.1]),
            }
            .compile()
            .unwrap(),
            PrimitiveSpec::Box {
                center: vec![0.0; 3],
                half_extents: vec![0.2, 0.1, 0.3],
                rotation_deg: Some(vec![5.0, 0.0, 40.0]),
            }
            .compile()
            .unwrap(),
            PrimitiveSpec::HalfSpace {
                normal: vec![1.0, -2.0],
                at_most: -0.3,
            }
            .compile()
            .unwrap(),
        ];
        let m = 0.05;
        for s in &shapes {
            let big = s.inflate(m);
            // Any point within m of an infeasible point is inside the inflated shape.
            let mut k = 0u64;
            for i in 0..30 {
                for j in 0..30 {
                    for l in 0..30 {
                        let x = [
                            -0.4 + 0.8 * i as f64 / 29.0,
                            -0.4 + 0.8 * j as f64 / 29.0,
                            -0.4 + 0.8 * l as f64 / 29.0,
                        ];
                        if s.contains(&x) {
                            k += 1;
                            for d in [
                                [m, 0.0, 0.0],
                                [0.0, -m, 0.0],
                                [0.0, 0.0, m * 0.999],
                                [0.57 * m, 0.57 * m, 0.57 * m],
                            ] {
                                let y = [x[0] + d[0], x[1] + d[1], x[2] + d[2]];
                                assert!(big.contains(&y), "{s:?} at {y:?}");
                            }
                        }
                    }
                }
            }
            assert!(k > 10);
        }
    }

    #[test]
    fn ellipse_distance_is_exact_on_the_axes() {
        let e = ell(vec![0.0, 0.0], vec![0.3, 0.1], None).inflate(0.05);
        assert!(e.contains(&[0.349, 0.0]) && !e.contains(&[0.351, 0.0]));
        assert!(e.contains(&[0.0, 0.149]) && !e.contains(&[0.0, 0.151]));
    }

    #[test]
    fn velocity_limit_unbounded_axis_and_shrinking() {
        let v = PrimitiveSpec::VelocityLimit {
            max_abs: vec![Some(1.0), None, Some(0.4)],
            max_norm: None,
        }
        .compile()
        .unwrap();
        assert!(v.contains(&[1.01, 0.0, 0.0]));
        assert!(!v.contains(&[1.0, 100.0, -0.4]));
        assert!(v.inflate(0.1).contains(&[0.95, 0.0, 0.0]));
    }

    #[test]
    fn a_command_beyond_a_velocity_limit_moves_to_the_nearest_feasible_command() {
        let v = PrimitiveSpec::VelocityLimit {
            max_abs: vec![Some(0.5), Some(1.0)],
            max_norm: Some(0.9),
        }
        .compile()
        .unwrap();
        // Every feasible command on a fine grid: none is nearer than the projection.
        let feasible: Vec<[f64; 2]> = (0..=400)
            .flat_map(|i| {
                (0..=400).map(move |j| [-1.0 + 0.005 * i as f64, -1.0 + 0.005 * j as f64])
            })
            .filter(|p| !v.contains(p))
            .collect();
        let dist = |a: &[f64], b: &[f64]| ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt();
        for x in [
            [0.9, 0.9],
            [2.0, 0.3],
            [0.1, 1.5],
            [-0.7, -0.8],
            [0.45, 0.95],
        ] {
            let mut p = x.to_vec();
            v.project_out(&mut p);
            assert!(
                !v.contains(&[p[0] * (1.0 - 1e-9), p[1] * (1.0 - 1e-9)]),
                "{x:?} -> {p:?}"
            );
            let nearest = feasible
                .iter()
                .map(|f| dist(f, &x))
                .fold(f64::INFINITY, f64::min);
            assert!(dist(&p, &x) <= nearest + 1e-9, "{x:?} -> {p:?}: {nearest}");
        }
    }

    #[test]
    fn velocity_limit_with_a_norm_bounds_the_speed_in_every_direction() {
        let v = PrimitiveSpec::VelocityLimit {
            max_abs: vec![Some(1.0), None, None],
            max_norm: Some(0.8),
        }
        .compile()
        .unwrap();
        // Inside both limits; beyond the norm only (diagonally); beyond the axis only.
        assert!(!v.contains(&[0.5, 0.5, 0.0]));
        assert!(v.contains(&[0.6, 0.6, 0.0]));
        assert!(!v.contains(&[0.0, 0.79, 0.0]) && v.contains(&[0.0, 0.81, 0.0]));
        assert!(v.inflate(0.1).contains(&[0.0, 0.71, 0.0]));
        let mut x = vec![1.5, 1.5, 0.0];
        v.project_out(&mut x);
        // The nearest point of the norm limit (not the x limit first, then the norm).
        assert!(
            (norm(&x) - 0.8).abs() < 1e-12 && (x[1] - x[0]).abs() < 1e-12,
            "{x:?}"
        );
        let bad = PrimitiveSpec::VelocityLimit {
            max_abs: vec![None, None],
            max_norm: Some(-1.0),
        };
        assert!(bad.compile().unwrap_err().contains("max_norm"));
    }

    #[test]
    fn half_space_is_a_wall_in_any_dimension_and_projects_onto_it() {
        let wall = PrimitiveSpec::HalfSpace {
            normal: vec![1.0],
            at_most: -3.0,
        }
        .compile()
        .unwrap();
        let mut x = vec![0.0; 18];
        assert!(!wall.contains(&x));
        x[0] = -3.0;
        assert!(wall.contains(&x));
        x[0] = -4.0;
        wall.project_out(&mut x);
        assert!((x[0] + 3.0).abs() < 1e-12 && x[1..].iter().all(|v| *v == 0.0));
        let (lo, hi) = wall.aabb(18);
        assert_eq!(
            (lo[0], hi[0], hi[1]),
            (f64::NEG_INFINITY, -3.0, f64::INFINITY)
        );
        assert!(wall.inflate(0.5).contains(&[-2.6]) && !wall.inflate(0.5).contains(&[-2.4]));
        let e = PrimitiveSpec::HalfSpace {
            normal: vec![0.0, 0.0],
            at_most: 1.0,
        }
        .compile()
        .unwrap_err();
        assert!(e.contains("normal"), "{e}");
    }

    #[test]
    fn bad_primitives_name_the_field() {
        let e = PrimitiveSpec::Cylinder {
            center: [0.0, 0.0],
            radius: -1.0,
            z_range: None,
        }
        .compile()
        .unwrap_err();
        assert!(e.contains("radius"), "{e}");
        let e = PrimitiveSpec::Ellipsoid {
            center: vec![0.0, 0.0],
            covariance: None,
            bound: None,
            semi_axes: Some(vec![1.0]),
            rotation_deg: None,
        }
        .compile()
        .unwrap_err();
        assert!(e.contains("semi_axes"), "{e}");
        let e = PrimitiveSpec::Box {
            center: vec![0.0, 0.0],
            half_extents: vec![1.0, 1.0],
            rotation_deg: Some(vec![1.0, 2.0, 3.0]),
        }
        .compile()
        .unwrap_err();
        assert!(e.contains("rotation_deg"), "{e}");
    }

    #[test]
    fn a_primitive_field_of_the_wrong_type_is_named_at_the_primitives_line() {
        #[derive(Debug, Deserialize)]
        struct Listed {
            #[serde(deserialize_with = "primitives")]
            obstacles: Vec<PrimitiveSpec>,
        }
        let parse = |yaml: &str| serde_yaml_ng::from_str::<Listed>(yaml).map_err(|e| e.to_string());
        let cylinder = "obstacles:\n  - {kind: cylinder, center: [0, 0], radius: 1}\n";
        assert_eq!(parse(cylinder).unwrap().obstacles.len(), 1);
        let e = parse(&format!(
            "{cylinder}  - kind: box\n    center: [0, 0]\n    half_extents: 0.1\n"
        ))
        .unwrap_err();
        assert!(
            e.contains("obstacles[1]: `half_extents`: invalid type: floating point `0.1`, expected a sequence")
                && e.contains("line 3"),
            "{e}"
        );
        // Errors that name what is wrong already stay as they are.
        for (yaml, says) in [
            (
                "{kind: box, center: [0, 0], half_extents: [1, 1], size: 2}",
                "obstacles[0]: unknown field `size`",
            ),
            (
                "{kind: box, center: [0, 0]}",
                "obstacles[0]: missing field `half_extents`",
            ),
            (
                "{kind: sphere, center: [0, 0]}",
                "obstacles[0]: unknown variant `sphere`",
            ),
        ] {
            let e = parse(&format!("obstacles:\n  - {yaml}\n")).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn rotation_deg_may_be_written_as_one_angle_and_a_3d_primitive_says_it_takes_three() {
        let parse = |yaml: &str| serde_yaml_ng::from_str::<PrimitiveSpec>(yaml);
        let planar = parse("{kind: box, center: [0, 0], half_extents: [1, 2], rotation_deg: 30}");
        let listed = parse("{kind: box, center: [0, 0], half_extents: [1, 2], rotation_deg: [30]}");
        let planar = planar.unwrap();
        assert_eq!(planar, listed.unwrap());
        let ellipse =
            parse("{kind: ellipsoid, center: [0, 0], semi_axes: [1, 2], rotation_deg: 45.5}");
        assert!(matches!(
            ellipse.unwrap(),
            PrimitiveSpec::Ellipsoid { rotation_deg: Some(r), .. } if r == [45.5]
        ));
        let spatial =
            parse("{kind: box, center: [0, 0, 0], half_extents: [1, 1, 1], rotation_deg: 25}");
        let e = spatial.unwrap().compile().unwrap_err();
        assert!(
            e.contains("rotation_deg has 1 values; a 3-D primitive takes 3 (roll, pitch, yaw)"),
            "{e}"
        );
        let e = parse("{kind: box, center: [0, 0], half_extents: [1, 2], rotation_deg: left}");
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("expected an angle in degrees")
        );
        // Absent and null both mean no rotation; written back, one angle is a list.
        let none = parse("{kind: box, center: [0, 0], half_extents: [1, 2], rotation_deg: null}");
        assert!(matches!(
            none.unwrap(),
            PrimitiveSpec::Box {
                rotation_deg: None,
                ..
            }
        ));
        let back = serde_yaml_ng::to_string(&planar).unwrap();
        assert!(back.contains("rotation_deg:\n- 30.0"), "{back}");
    }
}
