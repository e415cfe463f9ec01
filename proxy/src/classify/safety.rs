//! The read-safety verdict's types: [`ReadSafety`] and, for the writer-only case, the
//! closed reason [`WriterOnly`] (a /metrics label). The rules that produce them are in
//! `read.rs`.

/// Can the statement be proven safe on a replica?
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadSafety {
    /// A read a replica may serve (in autocommit mode or inside a READ ONLY transaction).
    ReplicaSafe,
    /// `START TRANSACTION READ ONLY`: starts a transaction whose statements may run on a
    /// replica (they are still classified one by one).
    ReadOnlyBegin,
    /// Only the writer may run it.
    WriterOnly(WriterOnly),
}

impl Default for ReadSafety {
    fn default() -> Self {
        ReadSafety::WriterOnly(WriterOnly::NotARead)
    }
}

impl ReadSafety {
    /// Whether a replica may run it.
    pub fn is_replica_safe(&self) -> bool {
        matches!(self, ReadSafety::ReplicaSafe)
    }
}

/// Why a statement must run on the writer (a label for metrics and logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriterOnly {
    /// Not a read: a write, DDL, SET, a transaction statement, CALL, ...
    NotARead,
    /// FOR UPDATE, FOR SHARE, LOCK IN SHARE MODE.
    LockingRead,
    /// SELECT ... INTO variables, OUTFILE or DUMPFILE.
    SelectInto,
    /// A sequence is advanced or its session value read.
    Sequence,
    /// `@x := ...` (or `INTO @x`) inside a read.
    UserVariableAssignment,
    /// A user-level lock function (locks live on one server).
    Lock,
    /// Reads the outcome of the previous statement (LAST_INSERT_ID, FOUND_ROWS, ROW_COUNT,
    /// SQL_CALC_FOUND_ROWS, SHOW WARNINGS, GET DIAGNOSTICS).
    SessionDependent,
    /// Answers about the server that runs it (SHOW STATUS, SHOW PROCESSLIST, ...).
    ServerSpecific,
    /// SLEEP, or a wait for a replication position.
    SideEffect,
    /// A function that is not a known builtin (a stored function, which may write).
    UnknownFunction,
}

impl WriterOnly {
    /// The label for /metrics (`reason="..."`).
    pub fn label(&self) -> &'static str {
        match self {
            WriterOnly::NotARead => "not_a_read",
            WriterOnly::LockingRead => "locking_read",
            WriterOnly::SelectInto => "select_into",
            WriterOnly::Sequence => "sequence",
            WriterOnly::UserVariableAssignment => "user_variable_assignment",
            WriterOnly::Lock => "lock",
            WriterOnly::SessionDependent => "session_dependent",
            WriterOnly::ServerSpecific => "server_specific",
            WriterOnly::SideEffect => "side_effect",
            WriterOnly::UnknownFunction => "unknown_function",
        }
    }
}
