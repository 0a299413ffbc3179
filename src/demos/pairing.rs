//! Pairing two message streams by stamp: the simulator publishes each pose and the twist that led to
//! it with the same stamp, on two topics that arrive independently. Either topic may run several
//! messages ahead of the other, so each keeps a queue; a message is dropped only when the other
//! topic has already passed its stamp (its partner was lost in transport, since each topic arrives
//! in order), never because the other topic is late.
use std::collections::VecDeque;

/// How many messages of one topic wait for their partners at most: the oldest goes beyond it (a
/// topic whose partner stream stopped must not grow without bound).
pub const MAX_WAITING: usize = 1000;

/// Pairs of (stamp, pose, twist) from two in-order streams keyed by a stamp.
#[derive(Debug, Default)]
pub struct StampPairs<S, A, B> {
    a: VecDeque<(S, A)>,
    b: VecDeque<(S, B)>,
    dropped: usize,
}

impl<S: Ord + Copy, A, B> StampPairs<S, A, B> {
    pub fn new() -> Self {
        StampPairs {
            a: VecDeque::new(),
            b: VecDeque::new(),
            dropped: 0,
        }
    }

    /// A message of the first stream; returns the pairs it completes, oldest first.
    pub fn push_a(&mut self, stamp: S, value: A) -> Vec<(S, A, B)> {
        self.dropped += wait(&mut self.a, (stamp, value));
        self.pairs()
    }

    /// A message of the second stream; returns the pairs it completes, oldest first.
    pub fn push_b(&mut self, stamp: S, value: B) -> Vec<(S, A, B)> {
        self.dropped += wait(&mut self.b, (stamp, value));
        self.pairs()
    }

    /// Messages dropped so far without a partner.
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    fn pairs(&mut self) -> Vec<(S, A, B)> {
        let mut out = Vec::new();
        while let (Some((sa, _)), Some((sb, _))) = (self.a.front(), self.b.front()) {
            match sa.cmp(sb) {
                std::cmp::Ordering::Equal => {
                    let (s, a) = self.a.pop_front().expect("front exists");
                    let (_, b) = self.b.pop_front().expect("front exists");
                    out.push((s, a, b));
                }
                // The other stream is past this stamp: this message's partner will not come.
                std::cmp::Ordering::Less => {
                    self.a.pop_front();
                    self.dropped += 1;
                }
                std::cmp::Ordering::Greater => {
                    self.b.pop_front();
                    self.dropped += 1;
                }
            }
        }
        out
    }
}

/// Queue a message; the oldest goes beyond [`MAX_WAITING`]. Returns how many were dropped.
fn wait<T>(queue: &mut VecDeque<T>, message: T) -> usize {
    queue.push_back(message);
    if queue.len() > MAX_WAITING {
        queue.pop_front();
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poses_several_messages_ahead_of_their_twists_are_all_paired_in_order() {
        let mut p = StampPairs::<u64, char, i32>::new();
        // A burst of poses first (one slot would keep only the last of them), then the twists.
        for (s, c) in [(1, 'a'), (2, 'b'), (3, 'c')] {
            assert!(p.push_a(s, c).is_empty());
        }
        assert_eq!(p.push_b(1, 10), vec![(1, 'a', 10)]);
        assert_eq!(p.push_b(2, 20), vec![(2, 'b', 20)]);
        assert_eq!(p.push_b(3, 30), vec![(3, 'c', 30)]);
        // And the other way round: twists ahead of their poses.
        assert!(p.push_b(4, 40).is_empty());
        assert!(p.push_b(5, 50).is_empty());
        assert_eq!(p.push_a(4, 'd'), vec![(4, 'd', 40)]);
        assert_eq!(p.push_a(5, 'e'), vec![(5, 'e', 50)]);
        assert_eq!(p.dropped(), 0, "no message lost");
    }

    #[test]
    fn a_message_whose_partner_was_lost_is_dropped_and_the_rest_still_pair() {
        let mut p = StampPairs::<u64, char, i32>::new();
        assert!(p.push_a(1, 'a').is_empty());
        assert!(p.push_a(2, 'b').is_empty());
        // Twist 1 was lost: twist 2 passes pose 1, which is dropped, and pairs with pose 2.
        assert_eq!(p.push_b(2, 20), vec![(2, 'b', 20)]);
        assert_eq!(p.dropped(), 1);
        assert_eq!(p.push_b(3, 30), vec![]);
        assert_eq!(p.push_a(3, 'c'), vec![(3, 'c', 30)]);
        assert_eq!(p.dropped(), 1);
    }

    #[test]
    fn a_stream_whose_partner_stopped_keeps_at_most_max_waiting_messages() {
        let mut p = StampPairs::<u64, u64, u64>::new();
        for s in 0..(MAX_WAITING as u64 + 5) {
            assert!(p.push_a(s, s).is_empty());
        }
        assert_eq!(p.dropped(), 5);
        // The newest are the ones kept.
        assert_eq!(p.push_b(MAX_WAITING as u64 + 4, 0).len(), 1);
    }
}
