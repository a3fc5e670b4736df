//! The fields of the library's events and of their spans (the lock, its kind and fence, a
//! loss's reason), gathered where the event happens for a package's structured log record
//! (Python's `extra`: `record.lock`, `record.fence`, ...), as structured formatters read them.

use std::cell::RefCell;
use std::fmt::Debug;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

/// A field's value as Python gets it: a number, or text.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i128),
    Text(String),
}

/// The fields of an event or a span, by name (a later one replaces an earlier one).
#[derive(Debug, Clone, Default)]
pub struct Fields(pub Vec<(&'static str, Value)>);

impl Fields {
    fn set(&mut self, name: &'static str, value: Value) {
        if name == "message" {
            return;
        }
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => self.0.push((name, value)),
        }
    }

    fn merge(&mut self, other: &Fields) {
        for (name, value) in &other.0 {
            self.set(name, value.clone());
        }
    }
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.set(field.name(), Value::Int(i128::from(value)));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field.name(), Value::Int(i128::from(value)));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field.name(), Value::Text(value.to_owned()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        // A `%field` (Display) comes here too, shown as Display.
        self.set(field.name(), Value::Text(format!("{value:?}")));
    }
}

thread_local! {
    /// The fields of the event being formatted on this thread (taken by its record).
    static CURRENT: RefCell<Option<Fields>> = const { RefCell::new(None) };
}

/// The fields of the event this thread is formatting, if any (taken: once per event).
pub fn take() -> Option<Fields> {
    CURRENT.with(|current| current.borrow_mut().take())
}

/// The layer that gathers them: a span's fields kept with the span, an event's merged over its
/// spans' (the outermost first), for the record the formatter then writes.
pub struct Gather;

impl<S> Layer<S> for Gather
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(of_span) = span.extensions().get::<Fields>() {
                    fields.merge(of_span);
                }
            }
        }
        event.record(&mut fields);
        CURRENT.with(|current| *current.borrow_mut() = Some(fields));
    }
}
