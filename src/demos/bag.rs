//! ROS 2 bags as MCAP files (the rosbag2 default storage, read by `ros2 bag`, Foxglove and the `mcap`
//! tools), free of ROS: messages arrive already serialized (CDR), with the `ros2msg` schema of their
//! type. The `demo_recorder` node keeps the raw messages of its demonstrations here.
use crate::error::{Error, Result, write_atomic};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One topic of the bag.
#[derive(Debug, Clone, PartialEq)]
pub struct Channel {
    pub topic: String,
    /// e.g. `geometry_msgs/msg/PoseStamped`.
    pub type_name: String,
    /// The type's definition with its dependencies (see [`ros2msg_schema`]).
    pub schema: String,
}

/// A bag held in memory and written whole (atomically) on every save, so that a file on disk is
/// always complete.
#[derive(Debug, Clone, Default)]
pub struct Bag {
    channels: Vec<Channel>,
    /// (channel index, log time ns, publish time ns, CDR bytes)
    messages: Vec<(usize, u64, u64, Vec<u8>)>,
}

impl Bag {
    pub fn new() -> Self {
        Bag::default()
    }

    /// Add a topic; returns its index for [`Bag::push`].
    pub fn add_channel(&mut self, channel: Channel) -> usize {
        self.channels.push(channel);
        self.channels.len() - 1
    }

    /// One serialized message: `log_time` when it was received, `publish_time` its header stamp (ns).
    pub fn push(&mut self, channel: usize, log_time: u64, publish_time: u64, cdr: Vec<u8>) {
        self.messages.push((channel, log_time, publish_time, cdr));
    }

    pub fn len(&self) -> usize {
        self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The MCAP bytes: profile `ros2`, `ros2msg` schemas, `cdr` messages in log-time order.
    pub fn to_mcap(&self) -> Result<Vec<u8>> {
        let mcap_err = |e: mcap::McapError| Error::Invalid(format!("MCAP: {e}"));
        let opts = mcap::WriteOptions::new()
            .profile("ros2")
            .library(concat!("pucl ", env!("CARGO_PKG_VERSION")))
            .compression(None);
        let mut w = opts
            .create(std::io::Cursor::new(Vec::new()))
            .map_err(mcap_err)?;
        let mut ids = Vec::with_capacity(self.channels.len());
        for c in &self.channels {
            let schema = w
                .add_schema(&c.type_name, "ros2msg", c.schema.as_bytes())
                .map_err(mcap_err)?;
            ids.push(
                w.add_channel(schema, &c.topic, "cdr", &BTreeMap::new())
                    .map_err(mcap_err)?,
            );
        }
        let mut order: Vec<usize> = (0..self.messages.len()).collect();
        order.sort_by_key(|&i| self.messages[i].1);
        let mut sequence = vec![0u32; self.channels.len()];
        for i in order {
            let (c, log_time, publish_time, data) = &self.messages[i];
            sequence[*c] += 1;
            let header = mcap::records::MessageHeader {
                channel_id: ids[*c],
                sequence: sequence[*c],
                log_time: *log_time,
                publish_time: *publish_time,
            };
            w.write_to_known_channel(&header, data).map_err(mcap_err)?;
        }
        w.finish().map_err(mcap_err)?;
        Ok(w.into_inner().into_inner())
    }

    /// Write the bag atomically (temporary file + rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        write_atomic(path, &self.to_mcap()?)
    }
}

/// The message types whose position [`read_positions`] takes: each starts with a `std_msgs/Header`
/// and then a point (`pose.position` of a PoseStamped, `point` of a PointStamped), so one CDR prefix
/// reads both.
pub const POSITION_TYPES: [&str; 2] = [
    "geometry_msgs/msg/PoseStamped",
    "geometry_msgs/msg/PointStamped",
];

/// The CDR prefix shared by [`POSITION_TYPES`]: the header, then x, y, z.
#[derive(serde::Deserialize)]
struct StampedPoint {
    sec: i32,
    nanosec: u32,
    _frame_id: String,
    x: f64,
    y: f64,
    z: f64,
}

/// The positions a bag holds on one topic, in time order.
#[derive(Debug, Clone, PartialEq)]
pub struct BagPositions {
    /// The topic read (as written in the bag, with its leading `/`).
    pub topic: String,
    pub type_name: String,
    /// (time in s, x, y, z): the header stamp, or the time the message was logged where the stamp is
    /// zero (an unstamped publisher).
    pub samples: Vec<(f64, [f64; 3])>,
    /// Messages left out for a non-finite coordinate: (index on the topic in the bag's order, log
    /// time in ns).
    pub non_finite: Vec<(usize, u64)>,
}

/// The positions on `topic` of an MCAP bag (rosbag2's default storage, chunks compressed or not),
/// messages in CDR of one of [`POSITION_TYPES`]. Without a topic, the bag's only topic of such a
/// type. `path` names the bag in errors, which also list the bag's topics where one is missing.
pub fn read_positions(bytes: &[u8], path: &Path, topic: Option<&str>) -> Result<BagPositions> {
    let err = |field: Option<&str>, msg: String| Error::file(path, None, field, msg);
    let stream = |e: mcap::McapError| err(None, format!("not a readable MCAP bag: {e}"));
    let topics = topics_of(bytes).map_err(stream)?;
    let listing = || {
        if topics.is_empty() {
            "the bag holds no messages".to_string()
        } else {
            let t: Vec<String> = topics
                .iter()
                .map(|(t, (ty, _))| format!("{t} ({ty})"))
                .collect();
            format!("its topics: {}", t.join(", "))
        }
    };
    let wanted = match topic {
        Some(t) => {
            let t = absolute_topic(t);
            if !topics.contains_key(&t) {
                return Err(err(
                    Some("topic"),
                    format!("no messages on {t}; {}", listing()),
                ));
            }
            t
        }
        None => {
            let candidates: Vec<&String> = topics
                .iter()
                .filter(|(_, (ty, _))| POSITION_TYPES.contains(&ty.as_str()))
                .map(|(t, _)| t)
                .collect();
            match candidates.as_slice() {
                [one] => (*one).clone(),
                [] => {
                    return Err(err(
                        Some("topic"),
                        format!(
                            "no topic of type {}; {}",
                            POSITION_TYPES.join(" or "),
                            listing()
                        ),
                    ));
                }
                _ => {
                    return Err(err(
                        Some("topic"),
                        format!("several topics hold positions, name one; {}", listing()),
                    ));
                }
            }
        }
    };
    let (type_name, encoding) = topics[&wanted].clone();
    if !POSITION_TYPES.contains(&type_name.as_str()) {
        return Err(err(
            Some("topic"),
            format!(
                "{wanted} carries '{type_name}', not {}",
                POSITION_TYPES.join(" or ")
            ),
        ));
    }
    if encoding != "cdr" {
        return Err(err(
            Some("topic"),
            format!("{wanted}'s messages are encoded as '{encoding}', not cdr"),
        ));
    }
    let mut out = BagPositions {
        topic: wanted.clone(),
        type_name,
        samples: Vec::new(),
        non_finite: Vec::new(),
    };
    let mut index = 0usize;
    for m in mcap::MessageStream::new(bytes).map_err(stream)? {
        let m = m.map_err(stream)?;
        if m.channel.topic != wanted {
            continue;
        }
        let p: StampedPoint = cdr::deserialize(&m.data).map_err(|e| {
            err(
                Some(&format!("{wanted} message {index}")),
                format!(
                    "not a {} in CDR (logged at {} ns): {e}",
                    out.type_name, m.log_time
                ),
            )
        })?;
        let t = if p.sec == 0 && p.nanosec == 0 {
            m.log_time as f64 * 1e-9
        } else {
            p.sec as f64 + p.nanosec as f64 * 1e-9
        };
        if [p.x, p.y, p.z].iter().all(|v| v.is_finite()) {
            out.samples.push((t, [p.x, p.y, p.z]));
        } else {
            out.non_finite.push((index, m.log_time));
        }
        index += 1;
    }
    // By time, as the robot moved: messages are written as they were received.
    out.samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(out)
}

/// The topics with messages in an MCAP bag: (type, message encoding) by topic. Read from its
/// summary where it has one (rosbag2 and the mcap writers write one), else off the messages (a
/// summary is optional in MCAP), which decompresses the bag once more.
fn topics_of(
    bytes: &[u8],
) -> std::result::Result<BTreeMap<String, (String, String)>, mcap::McapError> {
    let entry = |c: &mcap::Channel| {
        let ty = c.schema.as_ref().map_or(String::new(), |s| s.name.clone());
        (c.topic.clone(), (ty, c.message_encoding.clone()))
    };
    if let Some(summary) = mcap::Summary::read(bytes)?
        && !summary.channels.is_empty()
    {
        let counts = summary.stats.map(|s| s.channel_message_counts);
        return Ok(summary
            .channels
            .iter()
            .filter(|(id, _)| {
                counts
                    .as_ref()
                    .is_none_or(|c| c.get(id).is_some_and(|&n| n > 0))
            })
            .map(|(_, c)| entry(c))
            .collect());
    }
    let mut topics = BTreeMap::new();
    for m in mcap::MessageStream::new(bytes)? {
        let (topic, v) = entry(&m?.channel);
        topics.entry(topic).or_insert(v);
    }
    Ok(topics)
}

/// A topic name as rosbag2 records it: with its leading `/`.
pub fn absolute_topic(topic: &str) -> String {
    if topic.starts_with('/') {
        topic.to_string()
    } else {
        format!("/{topic}")
    }
}

/// The storage files of a bag: a file itself, or of a rosbag2 folder (as `ros2 bag record` writes
/// one) those its `metadata.yaml` lists in order, or without one its `.mcap` files by name. A bag
/// stored in SQLite (`.db3`, rosbag2's default before Jazzy) is an error saying how to convert it.
pub fn bag_files(path: &Path) -> Result<Vec<PathBuf>> {
    let sqlite = |p: &Path| {
        Error::file(
            p,
            None,
            None,
            "a SQLite bag (.db3); convert it to MCAP first: `ros2 bag convert -i BAG -o out.yaml` \
             with out.yaml holding `output_bags: [{uri: bag_mcap, storage_id: mcap}]`",
        )
    };
    if !path.is_dir() {
        if path.extension().is_some_and(|e| e == "db3") {
            return Err(sqlite(path));
        }
        return Ok(vec![path.to_path_buf()]);
    }
    #[derive(serde::Deserialize)]
    struct Metadata {
        rosbag2_bagfile_information: Info,
    }
    #[derive(serde::Deserialize)]
    struct Info {
        #[serde(default)]
        storage_identifier: String,
        #[serde(default)]
        relative_file_paths: Vec<String>,
    }
    let meta = path.join("metadata.yaml");
    if meta.exists() {
        let text = std::fs::read_to_string(&meta).map_err(|e| Error::io(&meta, e))?;
        let m: Metadata = serde_yaml_ng::from_str(&text).map_err(|e| {
            Error::file(
                &meta,
                e.location().map(|l| l.line() as u64),
                None,
                format!("not rosbag2 metadata: {e}"),
            )
        })?;
        let info = m.rosbag2_bagfile_information;
        if info.storage_identifier == "sqlite3" {
            return Err(sqlite(path));
        }
        if !info.relative_file_paths.is_empty() {
            return Ok(info
                .relative_file_paths
                .iter()
                .map(|f| path.join(f))
                .collect());
        }
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| Error::io(path, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "mcap"))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Error::file(
            path,
            None,
            None,
            "a folder without metadata.yaml or .mcap files: no bag",
        ));
    }
    Ok(files)
}

/// A storage file's bytes; one rosbag2 compressed whole (`compression_mode: file`, `.zstd`) is
/// decompressed.
pub fn read_bag_file(path: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    if path.extension().is_some_and(|e| e == "zstd") {
        return zstd::decode_all(bytes.as_slice())
            .map_err(|e| Error::file(path, None, None, format!("not zstd-compressed: {e}")));
    }
    Ok(bytes)
}

/// Where a bag's end-effector positions are read.
#[derive(Debug, Clone, Copy)]
pub enum PoseSource<'a> {
    /// A PoseStamped or PointStamped topic (None: the bag's only one).
    Topic(Option<&'a str>),
    /// The position of frame `tip` in frame `base`, from `topics` (`/tf` and `/tf_static`, or
    /// those under a robot's namespace).
    Frames {
        base: &'a str,
        tip: &'a str,
        topics: &'a crate::demos::tf::TfTopics,
    },
}

/// The positions of a bag, a file or a rosbag2 folder ([`bag_files`]): one [`BagPositions`] per
/// storage file read from a topic, one for the whole bag read from its transforms (a folder's
/// static transforms are in its first file), each with the file or bag it came from.
pub fn read_bag(bag: &Path, source: PoseSource) -> Result<Vec<(PathBuf, BagPositions)>> {
    let files = bag_files(bag)?;
    match source {
        PoseSource::Topic(topic) => files
            .into_iter()
            .map(|f| {
                let read = read_positions(&read_bag_file(&f)?, &f, topic)?;
                Ok((f, read))
            })
            .collect(),
        PoseSource::Frames { base, tip, topics } => {
            let mut tree = crate::demos::tf::TfTree::on(topics.clone());
            for f in &files {
                tree.add_bag(&read_bag_file(f)?, f)?;
            }
            let read = tree
                .positions(base, tip)
                .map_err(|msg| Error::file(bag, None, Some("frames"), msg))?;
            Ok(vec![(bag.to_path_buf(), read)])
        }
    }
}

/// The primitive field types of ROS 2 interface files.
const PRIMITIVES: [&str; 17] = [
    "bool", "byte", "char", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
    "uint32", "int64", "uint64", "string", "wstring", "time", "duration",
];

/// The separator rosbag2 and Foxglove use between a type and each of its dependencies.
const SEPARATOR: &str =
    "================================================================================";

/// The `ros2msg` schema of `type_name` (`pkg/msg/Type`), as rosbag2 writes it: the type's `.msg`
/// text, then each dependency as `MSG: pkg/Type` and its text, found under `<prefix>/share/<pkg>/msg/`
/// for each install prefix (e.g. those of `AMENT_PREFIX_PATH`).
pub fn ros2msg_schema(type_name: &str, prefixes: &[PathBuf]) -> Result<String> {
    let (pkg, name) = split_type(type_name, None)
        .ok_or_else(|| Error::Invalid(format!("'{type_name}' is not a ROS 2 message type")))?;
    let mut out = read_msg(&pkg, &name, prefixes)?;
    let mut queue = dependencies(&out, &pkg);
    let mut done = vec![(pkg, name)];
    while let Some(dep) = queue.pop() {
        if done.contains(&dep) {
            continue;
        }
        let text = read_msg(&dep.0, &dep.1, prefixes)?;
        queue.extend(dependencies(&text, &dep.0));
        out.push_str(&format!(
            "\n{SEPARATOR}\nMSG: {}/{}\n{}",
            dep.0,
            dep.1,
            text.trim_end()
        ));
        done.push(dep);
    }
    Ok(out)
}

/// The install prefixes of `AMENT_PREFIX_PATH` (where ROS 2 message definitions are).
pub fn ament_prefixes() -> Vec<PathBuf> {
    std::env::var_os("AMENT_PREFIX_PATH")
        .map(|v| std::env::split_paths(&v).collect())
        .unwrap_or_default()
}

fn split_type(t: &str, own_pkg: Option<&str>) -> Option<(String, String)> {
    let parts: Vec<&str> = t.split('/').collect();
    match (parts.as_slice(), own_pkg) {
        ([p, "msg", n], _) | ([p, n], _) if !p.is_empty() && !n.is_empty() => {
            Some((p.to_string(), n.to_string()))
        }
        ([n], Some(p)) if !n.is_empty() => Some((p.to_string(), n.to_string())),
        _ => None,
    }
}

fn read_msg(pkg: &str, name: &str, prefixes: &[PathBuf]) -> Result<String> {
    for p in prefixes {
        let f = p
            .join("share")
            .join(pkg)
            .join("msg")
            .join(format!("{name}.msg"));
        if let Ok(text) = std::fs::read_to_string(&f) {
            return Ok(text);
        }
    }
    Err(Error::Invalid(format!(
        "the definition of {pkg}/msg/{name} was not found under share/{pkg}/msg of {} install prefixes (AMENT_PREFIX_PATH)",
        prefixes.len()
    )))
}

/// The non-primitive field types of a `.msg` text (`Header` means `std_msgs/Header`).
fn dependencies(text: &str, pkg: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let line = line.split('#').next()?.trim();
            let ty = line.split_whitespace().next()?;
            // Drop array and string bounds: `float64[3]`, `int32[<=5]`, `string<=10`.
            let base = ty.split(['[', '<']).next()?;
            if PRIMITIVES.contains(&base) {
                return None;
            }
            if base == "Header" {
                return Some(("std_msgs".into(), "Header".into()));
            }
            split_type(base, Some(pkg))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(dir: &Path, pkg: &str, name: &str, text: &str) {
        let d = dir.join("share").join(pkg).join("msg");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("{name}.msg")), text).unwrap();
    }

    #[test]
    fn schema_lists_every_dependency_once_after_the_type() {
        let dir = tempfile::tempdir().unwrap();
        share(
            dir.path(),
            "geometry_msgs",
            "PoseStamped",
            "std_msgs/Header header\nPose pose\n",
        );
        share(
            dir.path(),
            "geometry_msgs",
            "Pose",
            "Point position # where\nPoint[2] corners\n",
        );
        share(
            dir.path(),
            "geometry_msgs",
            "Point",
            "float64 x\nfloat64 y\nfloat64 z\n",
        );
        share(
            dir.path(),
            "std_msgs",
            "Header",
            "builtin_interfaces/Time stamp\nstring frame_id\n",
        );
        share(
            dir.path(),
            "builtin_interfaces",
            "Time",
            "int32 sec\nuint32 nanosec\n",
        );
        let s = ros2msg_schema("geometry_msgs/msg/PoseStamped", &[dir.path().into()]).unwrap();
        assert!(s.starts_with("std_msgs/Header header\nPose pose\n"));
        for dep in [
            "MSG: std_msgs/Header\n",
            "MSG: geometry_msgs/Pose\n",
            "MSG: geometry_msgs/Point\n",
            "MSG: builtin_interfaces/Time\n",
        ] {
            assert_eq!(s.matches(dep).count(), 1, "{dep} in\n{s}");
        }
        assert_eq!(s.matches(SEPARATOR).count(), 4);
    }

    /// A PoseStamped in CDR as rclcpp writes it: the encapsulation header (CDR, little or big
    /// endian), stamp, frame_id (length with its NUL), padding to 8, position, orientation.
    fn pose_cdr(big_endian: bool, sec: i32, nanosec: u32, frame: &str, xyz: [f64; 3]) -> Vec<u8> {
        let mut b = vec![0, u8::from(!big_endian), 0, 0];
        let put = |b: &mut Vec<u8>, le: &[u8], be: &[u8]| {
            b.extend_from_slice(if big_endian { be } else { le })
        };
        put(&mut b, &sec.to_le_bytes(), &sec.to_be_bytes());
        put(&mut b, &nanosec.to_le_bytes(), &nanosec.to_be_bytes());
        let n = frame.len() as u32 + 1;
        put(&mut b, &n.to_le_bytes(), &n.to_be_bytes());
        b.extend_from_slice(frame.as_bytes());
        b.push(0);
        // Alignment counts from the end of the encapsulation header.
        while (b.len() - 4) % 8 != 0 {
            b.push(0);
        }
        for v in xyz.into_iter().chain([0.0, 0.0, 0.0, 1.0]) {
            put(&mut b, &v.to_le_bytes(), &v.to_be_bytes());
        }
        b
    }

    fn bag_of(messages: &[(&str, &str, u64, Vec<u8>)]) -> Vec<u8> {
        let mut bag = Bag::new();
        let mut channels: Vec<(String, usize)> = Vec::new();
        for (topic, ty, log_time, data) in messages {
            let c = match channels.iter().find(|(t, _)| t == topic) {
                Some((_, c)) => *c,
                None => {
                    let c = bag.add_channel(Channel {
                        topic: topic.to_string(),
                        type_name: ty.to_string(),
                        schema: String::new(),
                    });
                    channels.push((topic.to_string(), c));
                    c
                }
            };
            bag.push(c, *log_time, *log_time, data.clone());
        }
        bag.to_mcap().unwrap()
    }

    #[test]
    fn a_bags_positions_read_by_their_stamps_in_time_order_and_bad_bags_are_named() {
        let pose = "geometry_msgs/msg/PoseStamped";
        let bytes = bag_of(&[
            (
                "/ee_pose",
                pose,
                10,
                pose_cdr(false, 100, 500_000_000, "base", [0.1, 0.2, 0.3]),
            ),
            // Received later but stamped earlier; big endian; no frame.
            (
                "/ee_pose",
                pose,
                20,
                pose_cdr(true, 100, 250_000_000, "", [0.4, 0.5, 0.6]),
            ),
            ("/cmd", "geometry_msgs/msg/Twist", 25, vec![0, 1, 0, 0]),
            // Unstamped: timed when it was logged.
            (
                "/ee_pose",
                pose,
                101_000_000_000,
                pose_cdr(false, 0, 0, "base", [0.7, 0.8, 0.9]),
            ),
            (
                "/ee_pose",
                pose,
                40,
                pose_cdr(false, 100, 0, "base", [f64::NAN, 0.0, 0.0]),
            ),
        ]);
        let path = Path::new("run.mcap");
        let got = read_positions(&bytes, path, None).unwrap();
        assert_eq!(
            (got.topic.as_str(), got.type_name.as_str()),
            ("/ee_pose", pose)
        );
        assert_eq!(
            got.samples,
            [
                (100.25, [0.4, 0.5, 0.6]),
                (100.5, [0.1, 0.2, 0.3]),
                (101.0, [0.7, 0.8, 0.9])
            ]
        );
        // Indices count in the bag's order (log time, as written).
        assert_eq!(got.non_finite, [(2, 40)]);
        // The topic may be named without its leading slash.
        assert_eq!(read_positions(&bytes, path, Some("ee_pose")).unwrap(), got);
        let e = |bytes: &[u8], topic| read_positions(bytes, path, topic).unwrap_err().to_string();
        let missing = e(&bytes, Some("/tool_pose"));
        assert!(
            missing.contains("run.mcap")
                && missing.contains("/tool_pose")
                && missing.contains("/cmd (geometry_msgs/msg/Twist)"),
            "{missing}"
        );
        let wrong = e(&bytes, Some("/cmd"));
        assert!(wrong.contains("'geometry_msgs/msg/Twist'"), "{wrong}");
        assert!(e(b"not a bag", None).contains("not a readable MCAP bag"));
        // A message cut short names its index on the topic.
        let mut short = pose_cdr(false, 1, 0, "base", [0.0; 3]);
        short.truncate(30);
        let cut = e(
            &bag_of(&[
                ("/ee_pose", pose, 5, pose_cdr(false, 1, 0, "b", [0.0; 3])),
                ("/ee_pose", pose, 6, short),
            ]),
            None,
        );
        assert!(
            cut.contains("/ee_pose message 1") && cut.contains("not a"),
            "{cut}"
        );
        // Two position topics: the user names one.
        let two = bag_of(&[
            ("/a", pose, 1, pose_cdr(false, 1, 0, "", [0.0; 3])),
            ("/b", "geometry_msgs/msg/PointStamped", 2, vec![0, 1, 0, 0]),
        ]);
        assert!(e(&two, None).contains("several topics"));
        assert!(e(&bag_of(&[]), None).contains("no messages"));
    }

    #[test]
    fn chunks_compressed_with_zstd_or_lz4_read_as_uncompressed_ones() {
        let pose = pose_cdr(false, 7, 0, "base", [0.1, 0.2, 0.3]);
        // The last without a summary: its topics are read off the messages.
        for (compression, summary) in [
            (None, true),
            (Some(mcap::Compression::Zstd), true),
            (Some(mcap::Compression::Lz4), true),
            (Some(mcap::Compression::Zstd), false),
        ] {
            let mut w = mcap::WriteOptions::new()
                .compression(compression)
                .emit_summary_records(summary)
                .emit_statistics(summary)
                .create(std::io::Cursor::new(Vec::new()))
                .unwrap();
            let schema = w
                .add_schema("geometry_msgs/msg/PoseStamped", "ros2msg", b"")
                .unwrap();
            let c = w
                .add_channel(schema, "/ee_pose", "cdr", &BTreeMap::new())
                .unwrap();
            for k in 0..50u32 {
                let header = mcap::records::MessageHeader {
                    channel_id: c,
                    sequence: k,
                    log_time: u64::from(k),
                    publish_time: u64::from(k),
                };
                w.write_to_known_channel(&header, &pose).unwrap();
            }
            w.finish().unwrap();
            let bytes = w.into_inner().into_inner();
            let got = read_positions(&bytes, Path::new("b.mcap"), None).unwrap();
            assert_eq!(got.samples.len(), 50, "{compression:?}");
            assert_eq!(got.samples[0], (7.0, [0.1, 0.2, 0.3]), "{compression:?}");
        }
    }

    #[test]
    fn a_rosbag2_folder_lists_its_files_in_the_metadatas_order_and_a_sqlite_bag_says_how_to_convert()
     {
        let dir = tempfile::tempdir().unwrap();
        let bag = dir.path().join("rosbag2_2026_12_07");
        std::fs::create_dir(&bag).unwrap();
        for f in ["b_0.mcap", "a_1.mcap"] {
            std::fs::write(bag.join(f), b"").unwrap();
        }
        // Without metadata: the .mcap files by name.
        assert_eq!(
            bag_files(&bag).unwrap(),
            [bag.join("a_1.mcap"), bag.join("b_0.mcap")]
        );
        // As `ros2 bag record` writes it (abridged): its files in its order.
        std::fs::write(
            bag.join("metadata.yaml"),
            "rosbag2_bagfile_information:\n  version: 9\n  storage_identifier: mcap\n  \
             duration:\n    nanoseconds: 5\n  relative_file_paths:\n    - b_0.mcap\n    - a_1.mcap\n  \
             compression_format: \"\"\n  ros_distro: jazzy\n",
        )
        .unwrap();
        assert_eq!(
            bag_files(&bag).unwrap(),
            [bag.join("b_0.mcap"), bag.join("a_1.mcap")]
        );
        std::fs::write(
            bag.join("metadata.yaml"),
            "rosbag2_bagfile_information:\n  storage_identifier: sqlite3\n  relative_file_paths: [x_0.db3]\n",
        )
        .unwrap();
        let e = bag_files(&bag).unwrap_err().to_string();
        assert!(
            e.contains("rosbag2_2026_12_07") && e.contains("ros2 bag convert"),
            "{e}"
        );
        assert!(
            bag_files(&bag.join("x_0.db3"))
                .unwrap_err()
                .to_string()
                .contains("SQLite")
        );
        std::fs::write(bag.join("metadata.yaml"), "rosbag2_bagfile_information: [").unwrap();
        let e = bag_files(&bag).unwrap_err().to_string();
        assert!(
            e.contains("metadata.yaml") && e.contains("not rosbag2 metadata"),
            "{e}"
        );
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(
            bag_files(&empty)
                .unwrap_err()
                .to_string()
                .contains("no bag")
        );
        // A file compressed whole (compression_mode: file) reads as the bag it holds.
        let mcap = bag_of(&[(
            "/ee_pose",
            "geometry_msgs/msg/PoseStamped",
            1,
            pose_cdr(false, 3, 0, "", [1.0, 2.0, 3.0]),
        )]);
        let zst = bag.join("c_0.mcap.zstd");
        std::fs::write(&zst, zstd::encode_all(mcap.as_slice(), 3).unwrap()).unwrap();
        assert_eq!(read_bag_file(&zst).unwrap(), mcap);
        std::fs::write(&zst, b"plain").unwrap();
        assert!(
            read_bag_file(&zst)
                .unwrap_err()
                .to_string()
                .contains("not zstd")
        );
    }

    #[test]
    fn a_missing_definition_names_the_type() {
        let dir = tempfile::tempdir().unwrap();
        let e = ros2msg_schema("geometry_msgs/msg/Nope", &[dir.path().into()]).unwrap_err();
        assert!(e.to_string().contains("geometry_msgs/msg/Nope"), "{e}");
    }

    #[test]
    fn saved_bag_reads_back_with_its_schemas_channels_and_messages_in_time_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut bag = Bag::new();
        let a = bag.add_channel(Channel {
            topic: "/ee_pose".into(),
            type_name: "geometry_msgs/msg/Point".into(),
            schema: "float64 x\nfloat64 y\nfloat64 z\n".into(),
        });
        let b = bag.add_channel(Channel {
            topic: "/applied_twist".into(),
            type_name: "geometry_msgs/msg/Vector3".into(),
            schema: "float64 x\nfloat64 y\nfloat64 z\n".into(),
        });
        bag.push(a, 20, 19, vec![1, 2]);
        bag.push(b, 10, 9, vec![3]);
        bag.push(a, 30, 29, vec![4]);
        let path = dir.path().join("demos.mcap");
        bag.save(&path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let msgs: Vec<_> = mcap::MessageStream::new(&bytes)
            .unwrap()
            .map(|m| m.unwrap())
            .collect();
        let got: Vec<_> = msgs
            .iter()
            .map(|m| (m.channel.topic.as_str(), m.log_time, m.data.to_vec()))
            .collect();
        assert_eq!(
            got,
            [
                ("/applied_twist", 10, vec![3]),
                ("/ee_pose", 20, vec![1, 2]),
                ("/ee_pose", 30, vec![4])
            ]
        );
        let s = msgs[0].channel.schema.as_ref().unwrap();
        assert_eq!(
            (s.name.as_str(), s.encoding.as_str()),
            ("geometry_msgs/msg/Vector3", "ros2msg")
        );
        assert_eq!(msgs[0].channel.message_encoding, "cdr");
    }
}
