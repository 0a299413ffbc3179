//! Recording demonstrations from a stream of (pose, applied velocity) samples, free of ROS: the
//! `demo_recorder` node feeds it. Rows follow the reference demonstrations: (s_t, a_t) where a_t is
//! the action that moved s_t to s_{t+1}; the state reached by the last action is not a row.
use crate::demos::{DemoSet, Demonstration};
use crate::task::Task;

/// Automatic segmentation: start when the end effector moves, stop at the goal or when idle.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoSegment {
    /// Speed (position units per second) above which a sample counts as motion.
    pub motion_threshold: f64,
    /// Stop after this long (s) without motion.
    pub idle_timeout: f64,
}

impl Default for AutoSegment {
    /// A hand-guided or teleoperated arm at rest drifts by well under 5 mm/s; a second of rest
    /// after a demonstration ends it.
    fn default() -> Self {
        AutoSegment {
            motion_threshold: 0.005,
            idle_timeout: 1.0,
        }
    }
}

/// Rows of a recorded demonstration that moved farther than the action limit allows
/// ([`Demonstration::jumps`]): the pose did not come from the applied motion (a second node
/// publishing the pose, a reset, lost messages).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Jumps {
    pub count: usize,
    /// The largest such step (position units) and its row in the demonstration.
    pub largest: f64,
    pub at_step: usize,
    /// The longest step the action limit allows (position units).
    pub limit: f64,
}

impl Jumps {
    /// A warning for the log, or None when no step jumped.
    pub fn warning(&self) -> Option<String> {
        (self.count > 0).then(|| {
            format!(
                "{} steps moved farther than the action limit allows (largest {:.4} at step {}; the \
                 limit allows {:.4} per step): is a second node publishing the pose, or was the \
                 robot reset while recording?",
                self.count, self.largest, self.at_step, self.limit
            )
        })
    }
}

/// The recorder's state.
pub struct Recorder {
    task: Task,
    pub demos: DemoSet,
    recording: Option<Demonstration>,
    /// The last pose (state) seen, waiting for the action that leaves it.
    previous: Option<Vec<f64>>,
    auto: Option<AutoSegment>,
    /// Rows at either end of a demonstration no faster than this (position units per second) are
    /// rest, dropped at the stop: a real arm's pose jitters at rest.
    rest_speed: f64,
    last_motion: f64,
    /// Of the demonstration being recorded, or of the last one once it ended.
    jumps: Jumps,
}

impl Recorder {
    pub fn new(task: Task, auto: Option<AutoSegment>) -> Self {
        let demos = DemoSet::new(&task);
        Recorder {
            task,
            demos,
            recording: None,
            previous: None,
            rest_speed: auto
                .as_ref()
                .unwrap_or(&AutoSegment::default())
                .motion_threshold,
            auto,
            last_motion: 0.0,
            jumps: Jumps::default(),
        }
    }

    pub fn task(&self) -> &Task {
        &self.task
    }

    /// The speed at or below which rows at either end of a demonstration are rest (by default the
    /// automatic segmentation's motion threshold).
    pub fn set_rest_speed(&mut self, speed: f64) {
        self.rest_speed = speed;
    }

    pub fn is_recording(&self) -> bool {
        self.recording.is_some()
    }

    /// Whether demonstrations start and stop by themselves ([`AutoSegment`]).
    pub fn is_auto(&self) -> bool {
        self.auto.is_some()
    }

    /// Steps in the demonstration being recorded.
    pub fn current_len(&self) -> usize {
        self.recording
            .as_ref()
            .map_or(0, |d| d.len(self.task.state_dim()))
    }

    /// The steps that jumped in the demonstration being recorded, or in the last one once it ended.
    pub fn jumps(&self) -> &Jumps {
        &self.jumps
    }

    /// Whether a pose has been received: the state a demonstration started now would leave.
    pub fn has_pose(&self) -> bool {
        self.previous.is_some()
    }

    /// Begin a demonstration: an error if one is being recorded, or if no pose has been received
    /// yet (the first row's state would be unknown, so the demonstration would silently lose it).
    pub fn start(&mut self) -> Result<(), String> {
        if self.recording.is_some() {
            return Err("already recording".into());
        }
        if self.previous.is_none() {
            return Err("no pose received yet: the demonstration's first state is unknown".into());
        }
        self.recording = Some(Demonstration {
            states: Vec::new(),
            actions: Vec::new(),
            episode_return: None,
        });
        self.jumps = Jumps::default();
        Ok(())
    }

    /// End the demonstration; it is kept if it has at least one step. Returns its number of steps.
    /// Rest after the last motion (the arm at the goal while the stop is on its way) is dropped, as
    /// rest before the first motion is never recorded: how long the stop took is no part of it.
    pub fn stop(&mut self) -> Result<usize, String> {
        let mut d = self
            .recording
            .take()
            .ok_or("not recording: nothing to stop")?;
        let (n, m) = (self.task.state_dim(), self.task.action_dim());
        while d.actions.len() >= m && d.actions[d.actions.len() - m..].iter().all(|a| *a == 0.0) {
            d.actions.truncate(d.actions.len() - m);
            d.states.truncate(d.states.len() - n);
        }
        let n = d.len(self.task.state_dim());
        if n == 0 {
            return Err("the recording has no steps (no motion was received)".into());
        }
        // A real arm's rest is slow, not still: rest is what is no faster than the rest speed
        // (the time before the motion, the idle time before the stop).
        if !d.trim_rest(&self.task, self.rest_speed) {
            return Err(format!(
                "the recording never moved faster than {} per second (rest only)",
                self.rest_speed
            ));
        }
        let n = d.len(self.task.state_dim());
        // Of the rows kept: rest dropped above is no part of the demonstration, nor its jumps.
        let jumps = d.jumps(&self.task);
        let (at_step, largest) = jumps
            .iter()
            .cloned()
            .fold((0, 0.0), |best, j| if j.1 > best.1 { j } else { best });
        self.jumps = Jumps {
            count: jumps.len(),
            largest,
            at_step,
            limit: self.task.longest_step(),
        };
        self.demos.demos.push(d);
        Ok(n)
    }

    /// A sample at time `t`: the pose `position` reached by applying `velocity` (position units per
    /// second) from the previous pose. Returns Some(steps) when automatic segmentation ended a
    /// demonstration. Non-finite samples are ignored.
    pub fn sample(&mut self, t: f64, position: &[f64], velocity: &[f64]) -> Option<usize> {
        let m = self.task.action_dim();
        if position.len() != m
            || velocity.len() != m
            || position.iter().chain(velocity).any(|v| !v.is_finite())
        {
            return None;
        }
        let scale = self.task.spec.dynamics.velocity_scale;
        let action: Vec<f64> = velocity.iter().map(|v| v / scale).collect();
        let speed = velocity.iter().map(|v| v * v).sum::<f64>().sqrt();
        // The new state: position, and for tasks that carry it, the applied action as velocity state.
        let mut state = self.task.start_state(position);
        for (k, &i) in self.task.velocity_idx.iter().enumerate() {
            state[i] = action[k];
        }
        let at_goal = {
            let d: f64 = position
                .iter()
                .zip(self.task.goal())
                .map(|(p, g)| (p - g).powi(2))
                .sum();
            d.sqrt() < self.task.spec.goal.tolerance
        };
        let mut ended = None;
        if let Some(a) = &self.auto {
            if speed > a.motion_threshold {
                self.last_motion = t;
                // Motion within the goal region (the arm settling, or leaving it) starts no
                // demonstration: it would end at once, at the goal.
                if self.recording.is_none() && !at_goal {
                    let _ = self.start();
                }
            } else if self.recording.is_some() && t - self.last_motion > a.idle_timeout {
                ended = self.stop().ok();
            }
        }
        if let (Some(d), Some(prev)) = (self.recording.as_mut(), self.previous.as_ref())
            && (speed > 0.0 || !d.states.is_empty())
        {
            d.states.extend_from_slice(prev);
            d.actions.extend_from_slice(&action);
        }
        self.previous = Some(state);
        if self.auto.is_some() && at_goal && self.recording.is_some() {
            ended = self.stop().ok();
        }
        ended
    }
}

/// Poses further apart than this (s) are not interpolated between: the resampling starts again after
/// the gap (a driver publishes at 10 Hz or faster; a longer silence is no motion to make up).
pub const POSE_GAP: f64 = 0.5;

/// A pose stream at a driver's own rate (any, even uneven), resampled at the task's control period
/// `dt` for a robot that publishes no applied twist stamped like its pose: the position at
/// t0 + k dt by linear interpolation between the poses around it, with the velocity that moved the
/// previous sample there. Rows then follow the reference's (s_t, a_t) at the task's rate, whatever
/// the driver's. A gap longer than `max_gap` between poses starts a new grid: no motion is made up
/// across it. Poses not newer than the last are ignored.
#[derive(Debug, Clone)]
pub struct PoseResampler {
    dt: f64,
    max_gap: f64,
    /// The last pose received and its time.
    last: Option<(f64, Vec<f64>)>,
    /// The grid's origin, the index of the last sample emitted and its position (the next one is
    /// due at origin + (index + 1) dt: times counted, not summed, so that they do not drift).
    sample: Option<(f64, u64, Vec<f64>)>,
}

/// A resampled sample: time, position and the velocity (position units per second) that reached it.
pub type Resampled = (f64, Vec<f64>, Vec<f64>);

impl PoseResampler {
    pub fn new(dt: f64, max_gap: f64) -> Self {
        PoseResampler {
            dt,
            max_gap,
            last: None,
            sample: None,
        }
    }

    /// The samples whose time the pose at `t` has reached, in order. The first pose (and the first
    /// after a gap) is a sample at rest: the state a demonstration starts from.
    pub fn push(&mut self, t: f64, position: &[f64]) -> Vec<Resampled> {
        if !t.is_finite() || position.iter().any(|v| !v.is_finite()) {
            return Vec::new();
        }
        let restart = match &self.last {
            Some((t_last, _)) if t <= *t_last => return Vec::new(),
            Some((t_last, _)) => t - t_last > self.max_gap,
            None => true,
        };
        if restart {
            self.last = Some((t, position.to_vec()));
            self.sample = Some((t, 0, position.to_vec()));
            return vec![(t, position.to_vec(), vec![0.0; position.len()])];
        }
        let (Some((t0, p0)), Some((origin, mut k, mut ps))) =
            (self.last.take(), self.sample.take())
        else {
            unreachable!("a pose and a sample exist once started");
        };
        let mut out = Vec::new();
        // A sample due within a thousandth of dt of this pose is reached: times are written rounded,
        // and a stamp in seconds since 1970 holds only about 0.2 us as an f64. Otherwise a sample
        // due at a pose's time could miss it and be taken a hair after it, a step of almost nothing.
        // Such a sample is extrapolated along the last segment (at most one segment's length, for
        // poses very close in time).
        while origin + (k + 1) as f64 * self.dt <= t + 1e-3 * self.dt {
            k += 1;
            let tk = origin + k as f64 * self.dt;
            let w = ((tk - t0) / (t - t0)).clamp(0.0, 2.0);
            let pk: Vec<f64> = p0
                .iter()
                .zip(position)
                .map(|(a, b)| a + w * (b - a))
                .collect();
            let vk = pk.iter().zip(&ps).map(|(a, b)| (a - b) / self.dt).collect();
            out.push((tk, pk.clone(), vk));
            ps = pk;
        }
        self.last = Some((t, position.to_vec()));
        self.sample = Some((origin, k, ps));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_pair_each_action_with_the_state_it_left() {
        let t = Task::load("reach_obstacle_3d").unwrap();
        let mut r = Recorder::new(t, None);
        r.sample(0.0, &[0.35, -0.09, 0.05], &[0.0, 0.0, 0.0]);
        r.start().unwrap();
        r.sample(0.1, &[0.354, -0.09, 0.05], &[0.24, 0.0, 0.0]);
        r.sample(0.2, &[0.358, -0.09, 0.05], &[0.24, 0.0, 0.0]);
        assert_eq!(r.stop().unwrap(), 2);
        let d = &r.demos;
        assert_eq!(d.state(0, 0), &[0.35, -0.09, 0.05]);
        assert_eq!(d.state(0, 1), &[0.354, -0.09, 0.05]);
        assert_eq!(d.action(0, 1), &[0.5, 0.0, 0.0]);
    }

    #[test]
    fn stop_without_recording_or_steps_is_an_error() {
        let t = Task::load("reach_obstacle_3d").unwrap();
        let mut r = Recorder::new(t, None);
        assert!(r.stop().unwrap_err().contains("not recording"));
        r.sample(0.0, &[0.35, -0.09, 0.05], &[0.0, 0.0, 0.0]);
        r.start().unwrap();
        assert!(r.start().unwrap_err().contains("already"));
        assert!(r.stop().unwrap_err().contains("no steps"));
        assert!(r.demos.is_empty());
    }

    #[test]
    fn rest_after_the_last_motion_is_not_part_of_the_demonstration() {
        let t = Task::load("reach_obstacle_3d").unwrap();
        let mut r = Recorder::new(t, None);
        r.sample(0.0, &[0.35, -0.09, 0.05], &[0.0, 0.0, 0.0]);
        r.start().unwrap();
        r.sample(0.1, &[0.354, -0.09, 0.05], &[0.24, 0.0, 0.0]);
        // A pause between motions stays; the rest while the stop is on its way does not.
        r.sample(0.2, &[0.354, -0.09, 0.05], &[0.0, 0.0, 0.0]);
        r.sample(0.3, &[0.358, -0.09, 0.05], &[0.24, 0.0, 0.0]);
        for k in 0..5 {
            r.sample(0.4 + 0.1 * f64::from(k), &[0.358, -0.09, 0.05], &[0.0; 3]);
        }
        assert_eq!(r.stop().unwrap(), 3);
        assert_eq!(r.demos.action(0, 1), &[0.0, 0.0, 0.0]);
        assert_eq!(r.demos.action(0, 2), &[0.5, 0.0, 0.0]);
        // A recording that never moved has no steps.
        r.start().unwrap();
        r.sample(1.0, &[0.358, -0.09, 0.05], &[0.0; 3]);
        assert!(r.stop().unwrap_err().contains("no steps"));
    }

    #[test]
    fn start_before_any_pose_is_an_error_rather_than_a_demonstration_missing_its_first_row() {
        let t = Task::load("reach_obstacle_3d").unwrap();
        let mut r = Recorder::new(t, None);
        assert!(!r.has_pose());
        assert!(r.start().unwrap_err().contains("no pose received yet"));
        assert!(!r.is_recording());
        r.sample(0.0, &[0.35, -0.09, 0.05], &[0.0, 0.0, 0.0]);
        assert!(r.has_pose());
        r.start().unwrap();
        r.sample(0.1, &[0.354, -0.09, 0.05], &[0.24, 0.0, 0.0]);
        assert_eq!(r.stop().unwrap(), 1);
        assert_eq!(r.demos.state(0, 0), &[0.35, -0.09, 0.05]);
    }

    #[test]
    fn poses_from_a_second_publisher_are_kept_but_counted_as_jumps_the_action_limit_cannot_make() {
        let t = Task::load("reach_obstacle_3d").unwrap();
        let limit = t.longest_step();
        let mut r = Recorder::new(t, None);
        r.sample(0.0, &[0.35, -0.09, 0.05], &[0.0; 3]);
        r.start().unwrap();
        r.sample(0.1, &[0.354, -0.09, 0.05], &[0.24, 0.0, 0.0]);
        // Another simulator's arm, elsewhere, interleaved with this one.
        r.sample(0.15, &[0.60, 0.0, 0.04], &[0.24, 0.0, 0.0]);
        r.sample(0.2, &[0.358, -0.09, 0.05], &[0.24, 0.0, 0.0]);
        // At rest at the end, the other arm's poses still interleave: rest the stop drops, with the
        // jumps in it.
        r.sample(0.25, &[0.60, 0.0, 0.04], &[0.0; 3]);
        r.sample(0.3, &[0.358, -0.09, 0.05], &[0.0; 3]);
        r.sample(0.35, &[0.60, 0.0, 0.04], &[0.0; 3]);
        assert_eq!(r.stop().unwrap(), 3, "nothing recorded is dropped");
        // Rows 0.35, 0.354 (a step the limit allows) and 0.60 (the orphan's pose): one jump.
        let j = r.jumps().clone();
        assert_eq!((j.count, j.at_step), (1, 2));
        assert!((j.limit - limit).abs() < 1e-12 && (j.largest - 0.2622).abs() < 1e-4);
        let w = j.warning().unwrap();
        assert!(
            w.contains("1 steps") && w.contains("second node publishing the pose"),
            "{w}"
        );
        assert_eq!(
            r.demos.jumps(r.task()),
            vec![(0, 2, j.largest)],
            "as a file check finds"
        );
        // The next demonstration starts with none.
        r.start().unwrap();
        assert_eq!(r.jumps().count, 0);
    }

    #[test]
    fn automatic_segmentation_starts_on_motion_and_stops_at_the_goal_or_when_idle() {
        let t = Task::load("reach_obstacle_3d").unwrap();
        let mut r = Recorder::new(
            t,
            Some(AutoSegment {
                motion_threshold: 0.01,
                idle_timeout: 0.5,
            }),
        );
        r.sample(0.0, &[0.60, 0.0, 0.04], &[0.0, 0.0, 0.0]);
        assert!(!r.is_recording());
        r.sample(0.1, &[0.64, 0.0, 0.04], &[0.4, 0.0, 0.0]);
        assert!(r.is_recording());
        assert_eq!(
            r.sample(0.2, &[0.675, 0.0, 0.04], &[0.35, 0.0, 0.0]),
            Some(2),
            "at the goal"
        );
        r.sample(1.0, &[0.60, 0.0, 0.04], &[0.3, 0.0, 0.0]);
        assert!(r.is_recording());
        assert_eq!(r.sample(1.2, &[0.60, 0.0, 0.04], &[0.0, 0.0, 0.0]), None);
        // One step: the rest that timed out is not part of the demonstration.
        assert_eq!(
            r.sample(1.6, &[0.60, 0.0, 0.04], &[0.0, 0.0, 0.0]),
            Some(1),
            "idle for longer than 0.5 s"
        );
        assert_eq!(r.demos.len(), 2);
    }

    #[test]
    fn poses_at_a_drivers_uneven_rate_become_samples_at_the_tasks_period_with_their_velocity() {
        // A driver at about 100 Hz with jitter, moving at 0.1 m/s along x; the task runs at 60 Hz.
        let dt = 1.0 / 60.0;
        let mut r = PoseResampler::new(dt, 0.5);
        let mut samples = Vec::new();
        let mut t = 10.0;
        for k in 0..100 {
            let jitter = if k % 3 == 0 { 0.004 } else { -0.002 };
            samples.extend(r.push(t, &[0.1 * (t - 10.0), 0.2, 0.05]));
            t += 0.01 + jitter;
        }
        // The first is the start at rest; then one sample every dt.
        assert_eq!(samples[0].2, vec![0.0; 3]);
        for w in samples.windows(2) {
            assert!((w[1].0 - w[0].0 - dt).abs() < 1e-9);
            assert!(
                (w[1].2[0] - 0.1).abs() < 1e-9 && w[1].2[1].abs() < 1e-12,
                "{:?}",
                w[1]
            );
            assert!((w[1].1[0] - 0.1 * (w[1].0 - 10.0)).abs() < 1e-9);
        }
        let covered = samples.last().unwrap().0 - 10.0;
        assert_eq!(samples.len(), 1 + (covered / dt).round() as usize);
        assert!(covered > 1.0 - 0.02, "{covered}");
        // A pose no newer than the last is ignored; after a gap the grid starts again at rest.
        assert!(r.push(t - 0.5, &[9.0, 9.0, 9.0]).is_empty());
        let after = r.push(t + 1.0, &[0.5, 0.2, 0.05]);
        assert_eq!(after, vec![(t + 1.0, vec![0.5, 0.2, 0.05], vec![0.0; 3])]);
    }

    #[test]
    fn resampled_poses_fed_to_the_recorder_give_the_rows_of_the_motion_at_the_tasks_rate() {
        let task = Task::load("reach_obstacle_3d").unwrap();
        let dt = task.spec.dynamics.dt;
        let mut rec = Recorder::new(task.clone(), None);
        let mut r = PoseResampler::new(dt, 0.5);
        let mut feed = |rec: &mut Recorder, t: f64, x: f64| {
            for (ts, p, v) in r.push(t, &[x, 0.0, 0.05]) {
                rec.sample(ts, &p, &v);
            }
        };
        // At rest at x = 0.35 for 0.2 s (10 ms poses), then 0.24 m/s for 0.5 s.
        for k in 0..20 {
            feed(&mut rec, k as f64 * 0.01, 0.35);
        }
        rec.start().unwrap();
        for k in 20..=70 {
            feed(
                &mut rec,
                k as f64 * 0.01,
                0.35 + 0.24 * (k - 20) as f64 * 0.01,
            );
        }
        assert_eq!(rec.stop().unwrap(), 30);
        // Every row's action is half the action limit (0.24 m/s of 0.48), the state moving 4 mm.
        let d = &rec.demos;
        for i in 0..30 {
            assert!(
                (d.action(0, i)[0] - 0.5).abs() < 1e-9,
                "{:?}",
                d.action(0, i)
            );
            assert!((d.state(0, i)[0] - (0.35 + 0.004 * i as f64)).abs() < 1e-9);
        }
    }
}
