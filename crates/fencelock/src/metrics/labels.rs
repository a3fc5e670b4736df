//! Whether the series carry the lock's name as a `lock` label, and which: a lock name per
//! series would let a fleet that locks one name per account make millions of series, so it is
//! off unless asked for, by every name or through a mapping.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// The label of a name no pattern matches.
pub const OTHER: &str = "other";

/// How a lock's name becomes its series' `lock` label (see [`set_lock_labels`]).
///
/// ```
/// use fencelock::metrics::LockLabels;
///
/// let labels = LockLabels::patterns([("account:*", "account"), ("reports/nightly", "nightly")]);
/// assert_eq!(labels.label("account:42").as_deref(), Some("account"));
/// assert_eq!(labels.label("reports/nightly").as_deref(), Some("nightly"));
/// assert_eq!(labels.label("reports/weekly").as_deref(), Some("other"));
/// assert_eq!(LockLabels::off().label("account:42"), None);
/// ```
#[derive(Clone, Default)]
pub struct LockLabels {
    rule: Rule,
}

#[derive(Clone, Default)]
enum Rule {
    #[default]
    Off,
    Names,
    Patterns(Arc<[Pattern]>),
    With(Arc<LabelFn>),
}

/// A label function of [`LockLabels::with`].
type LabelFn = dyn Fn(&str) -> Option<String> + Send + Sync;

/// A name, or a prefix (a pattern ending in `*`), and its label.
#[derive(Debug)]
struct Pattern {
    text: String,
    prefix: bool,
    label: String,
}

impl std::fmt::Debug for LockLabels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.rule {
            Rule::Off => f.write_str("LockLabels::off()"),
            Rule::Names => f.write_str("LockLabels::names()"),
            Rule::Patterns(p) => f.debug_tuple("LockLabels::patterns").field(p).finish(),
            Rule::With(_) => f.write_str("LockLabels::with(..)"),
        }
    }
}

impl LockLabels {
    /// No `lock` label (the default).
    pub fn off() -> Self {
        LockLabels { rule: Rule::Off }
    }

    /// Every lock's name as its label: only for a process that uses a few, fixed names.
    pub fn names() -> Self {
        LockLabels { rule: Rule::Names }
    }

    /// A label by pattern: a pattern ending in `*` matches the names that start with what is
    /// before it, any other the name itself; the first that matches gives the label, and a
    /// name none matches is labelled `other`.
    pub fn patterns<I, P, L>(patterns: I) -> Self
    where
        I: IntoIterator<Item = (P, L)>,
        P: Into<String>,
        L: Into<String>,
    {
        let patterns: Vec<Pattern> = patterns
            .into_iter()
            .map(|(pattern, label)| {
                let mut text: String = pattern.into();
                let prefix = text.ends_with('*');
                if prefix {
                    text.pop();
                }
                Pattern {
                    text,
                    prefix,
                    label: label.into(),
                }
            })
            .collect();
        LockLabels {
            rule: Rule::Patterns(patterns.into()),
        }
    }

    /// A label from a function of the name (`None`: `other`). It runs at every acquisition,
    /// on the task that acquires: keep it quick.
    pub fn with(label: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        LockLabels {
            rule: Rule::With(Arc::new(label)),
        }
    }

    /// The `lock` label of the series of lock `name`, or `None` for no label.
    pub fn label(&self, name: &str) -> Option<String> {
        match &self.rule {
            Rule::Off => None,
            Rule::Names => Some(name.to_owned()),
            Rule::Patterns(patterns) => Some(
                patterns
                    .iter()
                    .find(|p| {
                        if p.prefix {
                            name.starts_with(&p.text)
                        } else {
                            name == p.text
                        }
                    })
                    .map_or_else(|| OTHER.to_owned(), |p| p.label.clone()),
            ),
            Rule::With(label) => Some(label(name).unwrap_or_else(|| OTHER.to_owned())),
        }
    }
}

static ON: AtomicBool = AtomicBool::new(false);
static LABELS: RwLock<Option<LockLabels>> = RwLock::new(None);

/// Sets how this process's series name their locks, from now on (series recorded before keep
/// their labels). Without a call, they have no `lock` label.
pub fn set_lock_labels(labels: LockLabels) {
    let on = !matches!(labels.rule, Rule::Off);
    if let Ok(mut slot) = LABELS.write() {
        *slot = on.then_some(labels);
    }
    ON.store(on, Ordering::Release);
}

/// The `lock` label for `name` under the process's setting.
pub(crate) fn lock_label(name: &str) -> Option<String> {
    if !ON.load(Ordering::Acquire) {
        return None;
    }
    LABELS.read().ok()?.as_ref()?.label(name)
}
