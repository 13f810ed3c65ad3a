//! HTML text escaping for the server-rendered pages and the audit report.

/// `s` made safe as HTML text and as a quoted attribute value.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}
