//! Moved to [`crate::app`]; this path stays until every caller is updated
//! (issue #33). The glob carries every public item that lived here:
//! `Supervisor`, `SupervisorError`, `Result`, `HookReply`, `SpooledMeta`,
//! `idempotency_key`, `import_spool`, `question_message`.
pub use crate::app::*;
