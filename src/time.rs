//! The one clock format gadfly writes: RFC 3339 in UTC with milliseconds
//! (`2025-01-02T03:04:05.678Z`), for stored rows, events and spooled hook
//! calls alike. A leaf, so the hook client can stamp a call without
//! depending on the store.

pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
