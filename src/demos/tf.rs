//! The end effector's position from a bag's transforms (`/tf` and `/tf_static`, or those topics under
//! a robot's namespace; tf2_msgs/TFMessage),
//! as most arms publish it: robot_state_publisher sends each link's transform to its parent, and no
//! topic carries the tool's pose. The tip's position in the base frame is composed along the chain of
//! frames between them at every stamp of a moving link of that chain, each link interpolated there
//! as tf2 does (translation linearly, rotation by slerp).
use crate::demos::bag::BagPositions;
use crate::error::{Error, Result};
use nalgebra::{Isometry3, Quaternion, Translation3, UnitQuaternion};
use std::collections::BTreeMap;
use std::path::Path;

/// The type of `/tf` and `/tf_static`.
pub const TF_TYPE: &str = "tf2_msgs/msg/TFMessage";

/// The topics transforms arrive on: `/tf` and `/tf_static`, or under a namespace (`/robot1/tf`,
/// `/robot1/tf_static`), as robots sharing a graph remap them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TfTopics {
    pub tf: String,
    pub tf_static: String,
}

impl Default for TfTopics {
    fn default() -> Self {
        TfTopics::in_namespace("").expect("the root namespace is valid")
    }
}

impl TfTopics {
    /// The transform topics under `namespace` ("" or "/": the root); an error for a name no ROS 2
    /// topic can have.
    pub fn in_namespace(namespace: &str) -> std::result::Result<Self, String> {
        let ns = namespace.trim_matches('/');
        let valid = |part: &str| {
            !part.is_empty()
                && !part.starts_with(|c: char| c.is_ascii_digit())
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        if !ns.is_empty() && !ns.split('/').all(valid) {
            return Err(format!(
                "'{namespace}' is not a ROS 2 namespace (names of letters, digits and _ between \
                 slashes, none starting with a digit)"
            ));
        }
        let prefix = if ns.is_empty() {
            String::new()
        } else {
            format!("/{ns}")
        };
        Ok(TfTopics {
            tf: format!("{prefix}/tf"),
            tf_static: format!("{prefix}/tf_static"),
        })
    }

    fn contains(&self, topic: &str) -> bool {
        topic == self.tf || topic == self.tf_static
    }
}

#[derive(serde::Deserialize)]
struct TransformStamped {
    sec: i32,
    nanosec: u32,
    frame_id: String,
    child_frame_id: String,
    translation: [f64; 3],
    /// x, y, z, w.
    rotation: [f64; 4],
}

/// One link of the frame tree: its parent and its transforms over time (one, at time 0, if static).
#[derive(Debug, Clone, Default)]
struct Link {
    parent: String,
    is_static: bool,
    samples: Vec<(f64, Isometry3<f64>)>,
}

/// The transforms of one or more bag files (of one recording).
#[derive(Debug, Clone, Default)]
pub struct TfTree {
    topics: TfTopics,
    links: BTreeMap<String, Link>,
    /// TFMessage topics of the bags other than `topics` (another robot's, or these under a
    /// namespace): named when `topics` carried nothing.
    other_tf_topics: std::collections::BTreeSet<String>,
    /// Transforms left out for a non-finite value or a rotation of zero length: (index of their
    /// message on its topic, the time it was logged in ns).
    pub invalid: Vec<(usize, u64)>,
}

impl TfTree {
    pub fn new() -> Self {
        TfTree::default()
    }

    /// A tree read from other transform topics than `/tf` and `/tf_static`.
    pub fn on(topics: TfTopics) -> Self {
        TfTree {
            topics,
            ..TfTree::default()
        }
    }

    /// Add the transforms of an MCAP bag's transform topics; `path` names it in errors.
    pub fn add_bag(&mut self, bytes: &[u8], path: &Path) -> Result<()> {
        let stream = |e: mcap::McapError| {
            Error::file(path, None, None, format!("not a readable MCAP bag: {e}"))
        };
        let mut index: BTreeMap<String, usize> = BTreeMap::new();
        for m in mcap::MessageStream::new(bytes).map_err(stream)? {
            let m = m.map_err(stream)?;
            let topic = m.channel.topic.as_str();
            let ty = m.channel.schema.as_ref().map_or("", |s| s.name.as_str());
            if !self.topics.contains(topic) {
                if ty == TF_TYPE {
                    self.other_tf_topics.insert(topic.to_string());
                }
                continue;
            }
            let i = index.entry(topic.to_string()).or_insert(0);
            let field = format!("{topic} message {i}");
            let at_message = (*i, m.log_time);
            *i += 1;
            if ty != TF_TYPE || m.channel.message_encoding != "cdr" {
                return Err(Error::file(
                    path,
                    None,
                    Some(&field),
                    format!(
                        "'{ty}' in '{}', not {TF_TYPE} in cdr",
                        m.channel.message_encoding
                    ),
                ));
            }
            let transforms: Vec<TransformStamped> = cdr::deserialize(&m.data).map_err(|e| {
                Error::file(
                    path,
                    None,
                    Some(&field),
                    format!("not a {TF_TYPE} in CDR: {e}"),
                )
            })?;
            let is_static = topic == self.topics.tf_static;
            for tf in transforms {
                self.add(tf, is_static, at_message)
                    .map_err(|msg| Error::file(path, None, Some(&field), msg))?;
            }
        }
        for link in self.links.values_mut() {
            link.samples.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
        Ok(())
    }

    fn add(
        &mut self,
        tf: TransformStamped,
        is_static: bool,
        at_message: (usize, u64),
    ) -> std::result::Result<(), String> {
        let t = tf.sec as f64 + tf.nanosec as f64 * 1e-9;
        let link = Transform {
            stamp: t,
            parent: &tf.frame_id,
            child: &tf.child_frame_id,
            translation: tf.translation,
            rotation: tf.rotation,
        };
        if !self.insert(&link, is_static)? {
            self.invalid.push(at_message);
        }
        Ok(())
    }

    /// Add one transform; false (and nothing added) for a non-finite value or a rotation of zero
    /// length, an error for a frame given a second parent.
    fn insert(&mut self, tf: &Transform, is_static: bool) -> std::result::Result<bool, String> {
        let [x, y, z] = tf.translation;
        let [qx, qy, qz, qw] = tf.rotation;
        let q = Quaternion::new(qw, qx, qy, qz);
        if ![x, y, z, qx, qy, qz, qw].iter().all(|v| v.is_finite()) || q.norm() < 1e-9 {
            return Ok(false);
        }
        let iso = Isometry3::from_parts(
            Translation3::new(x, y, z),
            UnitQuaternion::from_quaternion(q),
        );
        let (parent, child) = (strip(tf.parent), strip(tf.child));
        let link = self.links.entry(child.clone()).or_insert_with(|| Link {
            parent: parent.clone(),
            is_static,
            samples: Vec::new(),
        });
        if link.parent != parent {
            return Err(format!(
                "frame '{child}' has two parents, '{}' and '{parent}'",
                link.parent
            ));
        }
        if is_static {
            // The latest static transform holds, as tf2 keeps it.
            link.is_static = true;
            link.samples = vec![(0.0, iso)];
        } else if !link.is_static {
            link.samples.push((tf.stamp, iso));
        }
        Ok(true)
    }

    /// The frames from `tip` up to `base`, each with its parent: an error naming the frames where
    /// there is no such chain.
    fn chain(&self, base: &str, tip: &str) -> std::result::Result<Vec<&Link>, String> {
        let known = || {
            let mut frames: Vec<&str> = self.links.keys().map(String::as_str).collect();
            frames.extend(self.links.values().map(|l| l.parent.as_str()));
            frames.sort();
            frames.dedup();
            frames.join(", ")
        };
        if self.links.is_empty() {
            let (tf, tf_static) = (&self.topics.tf, &self.topics.tf_static);
            let mut e = format!("no transforms on {tf} or {tf_static}");
            if !self.other_tf_topics.is_empty() {
                let others: Vec<&str> = self.other_tf_topics.iter().map(String::as_str).collect();
                e.push_str(&format!(
                    "; the bag's transforms are on {}",
                    others.join(", ")
                ));
                // A namespace is only suggested where a topic is a namespaced tf or tf_static.
                let namespace = others.iter().find_map(|t| {
                    let ns = t
                        .strip_suffix("/tf_static")
                        .or_else(|| t.strip_suffix("/tf"))?;
                    (!ns.is_empty()).then_some(ns)
                });
                if let Some(ns) = namespace {
                    e.push_str(&format!(
                        " (a namespaced robot's: give its namespace, e.g. --tf-namespace {ns})"
                    ));
                }
            }
            return Err(e);
        }
        let mut chain = Vec::new();
        let mut frame = tip.to_string();
        let mut path = vec![frame.clone()];
        while frame != base {
            let Some(link) = self.links.get(&frame) else {
                return Err(if chain.is_empty() {
                    format!("no transform to frame '{tip}'; the frames: {}", known())
                } else {
                    format!(
                        "frame '{base}' is not above '{tip}': its chain goes {}",
                        path.join(" -> ")
                    )
                });
            };
            if chain.len() > self.links.len() {
                return Err(format!("the frames form a loop: {}", path.join(" -> ")));
            }
            chain.push(link);
            frame = link.parent.clone();
            path.push(frame.clone());
        }
        Ok(chain)
    }

    /// The position of frame `tip` in frame `base` at every stamp of a moving link between them
    /// (where every link of the chain has transforms on both sides of the stamp, or is static).
    pub fn positions(&self, base: &str, tip: &str) -> std::result::Result<BagPositions, String> {
        let (base, tip) = (strip(base), strip(tip));
        let chain = self.chain(&base, &tip)?;
        let mut times: Vec<f64> = chain
            .iter()
            .filter(|l| !l.is_static)
            .flat_map(|l| l.samples.iter().map(|s| s.0))
            .collect();
        times.sort_by(f64::total_cmp);
        times.dedup();
        if times.is_empty() && !chain.is_empty() {
            return Err(format!(
                "every link between '{base}' and '{tip}' is static: the tip never moves"
            ));
        }
        let samples = times
            .into_iter()
            .filter_map(|t| Some((t, tip_at(&chain, t)?)))
            .collect();
        Ok(BagPositions {
            topic: format!("{} {base} -> {tip}", self.topics.tf),
            type_name: TF_TYPE.into(),
            samples,
            non_finite: self.invalid.clone(),
        })
    }
}

/// The tip's position at time t along `chain` (tip's link first), or None where a link has no
/// transform around t.
fn tip_at(chain: &[&Link], t: f64) -> Option<[f64; 3]> {
    let mut pose = Isometry3::identity();
    // base <- ... <- tip: the tip's link is first in the chain.
    for link in chain.iter().rev() {
        pose *= at(link, t)?;
    }
    let p = pose.translation.vector;
    Some([p.x, p.y, p.z])
}

/// The base and the tip frame of "BASE:TIP" (e.g. `base_link:tool0`), or an error quoting it.
pub fn parse_frames(frames: &str) -> std::result::Result<(&str, &str), String> {
    match frames.split_once(':') {
        Some((base, tip)) if !base.is_empty() && !tip.is_empty() && !tip.contains(':') => {
            Ok((base, tip))
        }
        _ => Err(format!(
            "'{frames}': give the base frame and the tip frame as BASE:TIP, e.g. base_link:tool0"
        )),
    }
}

/// One transform as a TFMessage carries it: its stamp in s, the parent and child frames, the
/// translation and the rotation (x, y, z, w).
#[derive(Debug, Clone, Copy)]
pub struct Transform<'a> {
    pub stamp: f64,
    pub parent: &'a str,
    pub child: &'a str,
    pub translation: [f64; 3],
    pub rotation: [f64; 4],
}

/// How long a moving link's transforms are kept while the chain cannot be composed yet (a link of
/// it not published): enough to wait for a late publisher, bounded so that memory is.
const LIVE_KEEP: f64 = 10.0;

/// The tool's position from transforms as a live graph delivers them (`demo_recorder`'s `frames`):
/// after each message, the tip's position in the base frame at every new stamp of a moving link of
/// the chain where every link has a transform at or after it (interpolated as for a bag), in stamp
/// order; transforms older than what is needed are dropped.
#[derive(Debug, Clone)]
pub struct LiveChain {
    tree: TfTree,
    base: String,
    tip: String,
    /// The stamp of the last position given.
    last: Option<f64>,
}

impl LiveChain {
    pub fn new(base: &str, tip: &str) -> Self {
        LiveChain {
            tree: TfTree::new(),
            base: strip(base),
            tip: strip(tip),
            last: None,
        }
    }

    /// Add one transform from `/tf` (or `/tf_static` if `is_static`). An error, and nothing added,
    /// for a non-finite value, a rotation of zero length or a frame given a second parent.
    pub fn add(&mut self, tf: &Transform, is_static: bool) -> std::result::Result<(), String> {
        let what = || format!("'{}' -> '{}'", strip(tf.parent), strip(tf.child));
        if !self.tree.insert(tf, is_static)? {
            return Err(format!(
                "transform {} left out: a non-finite value or a rotation of zero length",
                what()
            ));
        }
        if !is_static {
            // Transforms may arrive out of stamp order (two publishers): keep each link sorted.
            let link = self
                .tree
                .links
                .get_mut(&strip(tf.child))
                .expect("just added");
            let s = &mut link.samples;
            if s.len() > 1 && s[s.len() - 2].0 > tf.stamp {
                s.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
        }
        Ok(())
    }

    /// Why no position can be composed (a frame not yet heard of, a base not above the tip), or
    /// None.
    pub fn waiting_for(&self) -> Option<String> {
        self.tree.chain(&self.base, &self.tip).err()
    }

    /// The tip's positions at the stamps the transforms added since the last call complete.
    pub fn positions(&mut self) -> Vec<(f64, [f64; 3])> {
        let Ok(chain) = self.tree.chain(&self.base, &self.tip) else {
            return Vec::new();
        };
        let after = self.last.unwrap_or(f64::NEG_INFINITY);
        let mut times: Vec<f64> = chain
            .iter()
            .filter(|l| !l.is_static)
            .flat_map(|l| l.samples.iter().map(|s| s.0))
            .filter(|&t| t > after)
            .collect();
        times.sort_by(f64::total_cmp);
        times.dedup();
        let out: Vec<(f64, [f64; 3])> = times
            .into_iter()
            .filter_map(|t| Some((t, tip_at(&chain, t)?)))
            .collect();
        let moving: Vec<String> = self
            .tree
            .links
            .iter()
            .filter(|(_, l)| !l.is_static)
            .map(|(name, _)| name.clone())
            .collect();
        if let Some(&(t, _)) = out.last() {
            self.last = Some(t);
        }
        let upto = self.last.unwrap_or(f64::NEG_INFINITY);
        // Keep, per moving link, its transforms from the last at or before the last position given
        // on (what interpolating later stamps needs), and never more than LIVE_KEEP seconds.
        for name in moving {
            let s = &mut self.tree.links.get_mut(&name).expect("listed").samples;
            let newest = s.last().map_or(f64::NEG_INFINITY, |x| x.0);
            let keep_from = s.partition_point(|x| x.0 <= upto).saturating_sub(1);
            let fresh = s.partition_point(|x| x.0 < newest - LIVE_KEEP);
            s.drain(..keep_from.max(fresh));
        }
        out
    }
}

/// tf2's frame names carry no leading slash.
fn strip(frame: &str) -> String {
    frame.trim_start_matches('/').to_string()
}

/// A link's transform at time t: static, or interpolated between the samples around t; None
/// outside them.
fn at(link: &Link, t: f64) -> Option<Isometry3<f64>> {
    if link.is_static {
        return link.samples.first().map(|s| s.1);
    }
    let s = &link.samples;
    let i = s.partition_point(|x| x.0 < t);
    if i < s.len() && s[i].0 == t {
        return Some(s[i].1);
    }
    if i == 0 || i == s.len() {
        return None;
    }
    let ((t0, a), (t1, b)) = (s[i - 1], s[i]);
    let w = (t - t0) / (t1 - t0);
    Some(a.lerp_slerp(&b, w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demos::bag::{Bag, Channel};

    /// A TFMessage in CDR (little endian) as rclcpp writes it: (stamp, parent, child, translation,
    /// rotation x y z w) per transform.
    type Tf<'a> = (f64, &'a str, &'a str, [f64; 3], [f64; 4]);
    fn tf_cdr(transforms: &[Tf]) -> Vec<u8> {
        let mut b = vec![0, 1, 0, 0];
        let align = |b: &mut Vec<u8>, n: usize| {
            while !(b.len() - 4).is_multiple_of(n) {
                b.push(0);
            }
        };
        let string = |b: &mut Vec<u8>, s: &str| {
            align(b, 4);
            b.extend_from_slice(&(s.len() as u32 + 1).to_le_bytes());
            b.extend_from_slice(s.as_bytes());
            b.push(0);
        };
        b.extend_from_slice(&(transforms.len() as u32).to_le_bytes());
        for (t, parent, child, xyz, q) in transforms {
            align(&mut b, 4);
            b.extend_from_slice(&(t.floor() as i32).to_le_bytes());
            b.extend_from_slice(&(((t - t.floor()) * 1e9).round() as u32).to_le_bytes());
            string(&mut b, parent);
            string(&mut b, child);
            align(&mut b, 8);
            for v in xyz.iter().chain(q) {
                b.extend_from_slice(&v.to_le_bytes());
            }
        }
        b
    }

    fn about_z(angle: f64) -> [f64; 4] {
        [0.0, 0.0, (angle / 2.0).sin(), (angle / 2.0).cos()]
    }

    fn bag(messages: &[(&str, u64, Vec<u8>)]) -> Vec<u8> {
        bag_on(&TfTopics::default(), messages)
    }

    /// A bag with the transforms on `topics`; each message names "/tf" or "/tf_static".
    fn bag_on(topics: &TfTopics, messages: &[(&str, u64, Vec<u8>)]) -> Vec<u8> {
        let mut bag = Bag::new();
        let tf = bag.add_channel(Channel {
            topic: topics.tf.clone(),
            type_name: TF_TYPE.into(),
            schema: String::new(),
        });
        let tf_static = bag.add_channel(Channel {
            topic: topics.tf_static.clone(),
            type_name: TF_TYPE.into(),
            schema: String::new(),
        });
        for (topic, log, data) in messages {
            let c = if *topic == "/tf" { tf } else { tf_static };
            bag.push(c, *log, *log, data.clone());
        }
        bag.to_mcap().unwrap()
    }

    #[test]
    fn the_tips_position_is_composed_along_the_chain_with_links_interpolated_at_each_others_stamps()
    {
        // An arm: the shoulder 0.3 m above base_link turns about z at 1 rad/s (stamps every 10 ms);
        // the elbow, 0.4 m out along the shoulder's x, turns about z at -0.5 rad/s (stamps 5 ms
        // later); the tool is 0.1 m out along the elbow's x (static). A camera beside is no part.
        let mut messages = vec![(
            "/tf_static",
            0,
            tf_cdr(&[
                (5.0, "elbow", "tool0", [0.1, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]),
                (
                    5.0,
                    "/base_link",
                    "camera",
                    [1.0, 1.0, 1.0],
                    [0.0, 0.0, 0.0, 1.0],
                ),
            ]),
        )];
        for k in 0..=100 {
            let t = 10.0 + 0.01 * k as f64;
            messages.push((
                "/tf",
                k * 10 + 1,
                tf_cdr(&[(
                    t,
                    "base_link",
                    "shoulder",
                    [0.0, 0.0, 0.3],
                    about_z(t - 10.0),
                )]),
            ));
            messages.push((
                "/tf",
                k * 10 + 6,
                tf_cdr(&[(
                    t + 0.005,
                    "shoulder",
                    "elbow",
                    [0.4, 0.0, 0.0],
                    about_z(-0.5 * (t + 0.005 - 10.0)),
                )]),
            ));
        }
        let mut tree = TfTree::new();
        tree.add_bag(&bag(&messages), Path::new("arm.mcap"))
            .unwrap();
        let got = tree.positions("base_link", "tool0").unwrap();
        // Stamps of both moving links where both have transforms around them: 10.005 .. 11.0.
        assert_eq!(got.samples.len(), 200, "{:?}", &got.samples[..3]);
        for (t, p) in &got.samples {
            let (a, b) = (t - 10.0, -0.5 * (t - 10.0));
            let want = [
                0.4 * a.cos() + 0.1 * (a + b).cos(),
                0.4 * a.sin() + 0.1 * (a + b).sin(),
                0.3,
            ];
            for c in 0..3 {
                assert!((p[c] - want[c]).abs() < 1e-9, "t {t}: {p:?} vs {want:?}");
            }
        }
        // What is missing is named.
        let e = tree.positions("base_link", "gripper").unwrap_err();
        assert!(e.contains("'gripper'") && e.contains("tool0"), "{e}");
        let e = tree.positions("world", "tool0").unwrap_err();
        assert!(e.contains("tool0 -> elbow -> shoulder -> base_link"), "{e}");
        let e = tree.positions("base_link", "camera").unwrap_err();
        assert!(e.contains("static"), "{e}");
        // A frame with two parents.
        let mut tree = TfTree::new();
        let two = bag(&[
            (
                "/tf",
                1,
                tf_cdr(&[(1.0, "a", "c", [0.0; 3], [0.0, 0.0, 0.0, 1.0])]),
            ),
            (
                "/tf",
                2,
                tf_cdr(&[(2.0, "b", "c", [0.0; 3], [0.0, 0.0, 0.0, 1.0])]),
            ),
        ]);
        let e = tree
            .add_bag(&two, Path::new("x.mcap"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("x.mcap") && e.contains("/tf message 1") && e.contains("two parents"),
            "{e}"
        );
        // A transform cut short.
        let mut short = tf_cdr(&[(1.0, "a", "c", [0.0; 3], [0.0, 0.0, 0.0, 1.0])]);
        short.truncate(40);
        let e = TfTree::new()
            .add_bag(&bag(&[("/tf", 1, short)]), Path::new("x.mcap"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/tf message 0") && e.contains("not a"), "{e}");
        assert!(
            TfTree::new()
                .positions("a", "b")
                .unwrap_err()
                .contains("no transforms")
        );
    }

    /// The arm of the chain test as transforms: (stamp, parent, child, translation, rotation).
    fn arm_links(k: usize) -> [Tf<'static>; 2] {
        let t = 10.0 + 0.01 * k as f64;
        [
            (
                t,
                "base_link",
                "shoulder",
                [0.0, 0.0, 0.3],
                about_z(t - 10.0),
            ),
            (
                t + 0.005,
                "shoulder",
                "elbow",
                [0.4, 0.0, 0.0],
                about_z(-0.5 * (t + 0.005 - 10.0)),
            ),
        ]
    }

    fn live(chain: &mut LiveChain, tf: &Tf, is_static: bool) -> Result<(), String> {
        let (stamp, parent, child, translation, rotation) = *tf;
        chain.add(
            &Transform {
                stamp,
                parent,
                child,
                translation,
                rotation,
            },
            is_static,
        )
    }

    #[test]
    fn live_transforms_give_the_positions_a_bag_of_them_gives_as_they_arrive_in_bounded_memory() {
        // The chain test's arm, its transforms delivered one by one as on a live graph, the static
        // tool link arriving late (a latched /tf_static joining after /tf): nothing comes before the
        // chain is complete, and then the same positions as the bag of the same transforms, each once,
        // in stamp order.
        let tool = (5.0, "elbow", "tool0", [0.1, 0.0, 0.0], about_z(0.0));
        let mut messages = Vec::new();
        let mut chain = LiveChain::new("/base_link", "tool0");
        let mut got = Vec::new();
        for k in 0..=100 {
            for (i, link) in arm_links(k).iter().enumerate() {
                messages.push(("/tf", (k * 10 + 1 + 5 * i) as u64, tf_cdr(&[*link])));
                live(&mut chain, link, false).unwrap();
                got.extend(chain.positions());
            }
            if k == 20 {
                assert!(got.is_empty(), "{got:?}");
                let e = chain.waiting_for().unwrap();
                assert!(e.contains("'tool0'") && e.contains("elbow"), "{e}");
                live(&mut chain, &tool, true).unwrap();
                assert_eq!(chain.waiting_for(), None);
            }
            // Only what interpolating later stamps needs is kept.
            let kept: usize = chain.tree.links.values().map(|l| l.samples.len()).sum();
            assert!(k <= 20 || kept <= 5, "{kept} transforms kept at step {k}");
        }
        messages.push(("/tf_static", 0, tf_cdr(&[tool])));
        let mut tree = TfTree::new();
        tree.add_bag(&bag(&messages), Path::new("arm.mcap"))
            .unwrap();
        let want = tree.positions("base_link", "tool0").unwrap().samples;
        // The bag's stamps went through (sec, nanosec): equal to a nanosecond.
        assert_eq!(got.len(), want.len());
        for ((t, p), (u, q)) in got.iter().zip(&want) {
            assert!((t - u).abs() < 1e-9, "{t} vs {u}");
            assert!((0..3).all(|c| (p[c] - q[c]).abs() < 1e-9), "{p:?} vs {q:?}");
        }
        // A transform out of stamp order is placed by its stamp; a broken one is refused, named.
        let mut chain = LiveChain::new("base", "tool");
        for (t, x) in [(1.0, 0.1), (3.0, 0.3), (2.0, 0.2)] {
            live(
                &mut chain,
                &(t, "base", "tool", [x, 0.0, 0.0], about_z(0.0)),
                false,
            )
            .unwrap();
        }
        let xs: Vec<(f64, f64)> = chain.positions().iter().map(|(t, p)| (*t, p[0])).collect();
        assert_eq!(xs, vec![(1.0, 0.1), (2.0, 0.2), (3.0, 0.3)]);
        let e = live(
            &mut chain,
            &(4.0, "base", "tool", [f64::NAN, 0.0, 0.0], about_z(0.0)),
            false,
        )
        .unwrap_err();
        assert!(
            e.contains("'base' -> 'tool'") && e.contains("non-finite"),
            "{e}"
        );
        let e = live(
            &mut chain,
            &(4.0, "other", "tool", [0.0; 3], about_z(0.0)),
            false,
        )
        .unwrap_err();
        assert!(e.contains("two parents"), "{e}");
        assert!(chain.positions().is_empty());
    }

    #[test]
    fn a_namespaced_robots_transforms_are_read_under_its_namespace_and_named_when_it_is_not_given()
    {
        let robot1 = TfTopics::in_namespace("/robot1/").unwrap();
        assert_eq!(
            (robot1.tf.as_str(), robot1.tf_static.as_str()),
            ("/robot1/tf", "/robot1/tf_static")
        );
        assert_eq!(TfTopics::in_namespace("/").unwrap(), TfTopics::default());
        assert_eq!(TfTopics::default().tf, "/tf");
        for bad in ["robot 1", "/1robot", "a//b"] {
            let e = TfTopics::in_namespace(bad).unwrap_err();
            assert!(e.contains(bad) && e.contains("namespace"), "{e}");
        }
        let one = |t: f64, x: f64| tf_cdr(&[(t, "base", "tool", [x, 0.0, 0.0], about_z(0.0))]);
        let fixed = tf_cdr(&[(0.0, "world", "base", [0.0, 0.0, 1.0], about_z(0.0))]);
        let bytes = bag_on(
            &robot1,
            &[
                ("/tf_static", 0, fixed),
                ("/tf", 1, one(1.0, 0.1)),
                ("/tf", 2, one(2.0, 0.2)),
            ],
        );
        let mut tree = TfTree::new();
        tree.add_bag(&bytes, Path::new("ns.mcap")).unwrap();
        let e = tree.positions("base", "tool").unwrap_err();
        assert!(
            e.contains("no transforms on /tf or /tf_static")
                && e.contains("/robot1/tf, /robot1/tf_static")
                && e.contains("--tf-namespace /robot1"),
            "{e}"
        );
        // Transforms on a topic of another name are listed, and no namespace is made up for them.
        let relay = TfTopics {
            tf: "/tf_relay".into(),
            tf_static: "/tf_relay_static".into(),
        };
        let mut tree = TfTree::new();
        tree.add_bag(
            &bag_on(&relay, &[("/tf", 1, one(1.0, 0.1))]),
            Path::new("r.mcap"),
        )
        .unwrap();
        let e = tree.positions("base", "tool").unwrap_err();
        assert!(
            e.contains("are on /tf_relay") && !e.contains("--tf-namespace"),
            "{e}"
        );
        let mut tree = TfTree::on(robot1);
        tree.add_bag(&bytes, Path::new("ns.mcap")).unwrap();
        let got = tree.positions("base", "tool").unwrap();
        assert_eq!(got.topic, "/robot1/tf base -> tool");
        assert_eq!(
            got.samples,
            vec![(1.0, [0.1, 0.0, 0.0]), (2.0, [0.2, 0.0, 0.0])]
        );
        let got = tree.positions("world", "tool").unwrap();
        assert_eq!(
            got.samples,
            vec![(1.0, [0.1, 0.0, 1.0]), (2.0, [0.2, 0.0, 1.0])]
        );
    }
}
