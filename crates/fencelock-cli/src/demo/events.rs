//! What a demo worker tells the demo: one event per line on its stdout.
//!
//! ```text
//! READY
//! ACQUIRED <fence>
//! WROTE <fence> step=<1|2> ok|refused current=<fence> by=<worker> held=<true|false>
//! LOST <fence> <reason>
//! RELEASED <fence> held=<true|false>
//! ERROR <message>
//! ```
//!
//! `WROTE`: the resource accepted or refused the write; `current` and `by` are the fence and the
//! writer the resource holds after it; `held` is what the writer's guard said right *after* the
//! write (the worker does not ask before writing, like a process that does not know it was
//! paused).

/// One event of a demo worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Connected and about to contend.
    Ready,
    /// Took the lock with this fence.
    Acquired {
        /// The fence of the grant.
        fence: u64,
    },
    /// Wrote to the protected resource with its fence.
    Wrote {
        /// The writer's fence.
        fence: u64,
        /// First or second write of the grant.
        step: u8,
        /// Whether the resource accepted the write.
        accepted: bool,
        /// The highest fence the resource has seen, after this write.
        current: u64,
        /// The worker that wrote with `current`.
        by: u32,
        /// Whether the writer's guard still said "held" after the write.
        held: bool,
    },
    /// The guard reported the lock lost before it was released.
    Lost {
        /// The fence of the lost grant.
        fence: u64,
        /// Why, as the library says it.
        reason: String,
    },
    /// Released the lock; `held`: it was still held at that point.
    Released {
        /// The fence of the released grant.
        fence: u64,
        /// Whether the lock was still held when released.
        held: bool,
    },
    /// The worker failed and stops.
    Failed {
        /// What went wrong.
        message: String,
    },
}

impl Event {
    /// The event as one line (without the newline).
    pub fn to_line(&self) -> String {
        match self {
            Event::Ready => "READY".into(),
            Event::Acquired { fence } => format!("ACQUIRED {fence}"),
            Event::Wrote {
                fence,
                step,
                accepted,
                current,
                by,
                held,
            } => {
                let verdict = if *accepted { "ok" } else { "refused" };
                format!("WROTE {fence} step={step} {verdict} current={current} by={by} held={held}")
            }
            Event::Lost { fence, reason } => format!("LOST {fence} {}", one_line(reason)),
            Event::Released { fence, held } => format!("RELEASED {fence} held={held}"),
            Event::Failed { message } => format!("ERROR {}", one_line(message)),
        }
    }

    /// Parses a line written by [`to_line`](Self::to_line).
    pub fn parse(line: &str) -> Option<Event> {
        let line = line.trim_end();
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        let mut words = rest.split(' ');
        match kind {
            "READY" if rest.is_empty() => Some(Event::Ready),
            "ACQUIRED" => Some(Event::Acquired {
                fence: rest.parse().ok()?,
            }),
            "WROTE" => {
                let fence = words.next()?.parse().ok()?;
                let step = field(words.next()?, "step")?.parse().ok()?;
                let accepted = match words.next()? {
                    "ok" => true,
                    "refused" => false,
                    _ => return None,
                };
                let current = field(words.next()?, "current")?.parse().ok()?;
                let by = field(words.next()?, "by")?.parse().ok()?;
                let held = field(words.next()?, "held")?.parse().ok()?;
                Some(Event::Wrote {
                    fence,
                    step,
                    accepted,
                    current,
                    by,
                    held,
                })
            }
            "LOST" => {
                let (fence, reason) = rest.split_once(' ').unwrap_or((rest, ""));
                Some(Event::Lost {
                    fence: fence.parse().ok()?,
                    reason: reason.to_owned(),
                })
            }
            "RELEASED" => Some(Event::Released {
                fence: words.next()?.parse().ok()?,
                held: field(words.next()?, "held")?.parse().ok()?,
            }),
            "ERROR" => Some(Event::Failed {
                message: rest.to_owned(),
            }),
            _ => None,
        }
    }
}

/// The value of `name=value`.
fn field<'a>(word: &'a str, name: &str) -> Option<&'a str> {
    word.strip_prefix(name)?.strip_prefix('=')
}

fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_survive_the_round_trip() {
        let events = [
            Event::Ready,
            Event::Acquired {
                fence: 1_763_770_000_123_456,
            },
            Event::Wrote {
                fence: 7,
                step: 2,
                accepted: false,
                current: 9,
                by: 3,
                held: false,
            },
            Event::Lost {
                fence: 7,
                reason: "the lease ran out before it was renewed".into(),
            },
            Event::Released {
                fence: 7,
                held: false,
            },
            Event::Failed {
                message: "Redis at 127.0.0.1:1 is unreachable".into(),
            },
        ];
        for event in events {
            assert_eq!(
                Event::parse(&event.to_line()),
                Some(event.clone()),
                "{event:?}"
            );
        }
    }

    #[test]
    fn garbage_is_not_an_event() {
        for line in [
            "",
            "HELLO",
            "ACQUIRED x",
            "WROTE 1 step=1 maybe current=1 by=1 held=true",
        ] {
            assert_eq!(Event::parse(line), None, "{line}");
        }
        let multi_line = Event::Failed {
            message: "two\nlines".into(),
        };
        assert_eq!(multi_line.to_line(), "ERROR two lines");
    }
}
