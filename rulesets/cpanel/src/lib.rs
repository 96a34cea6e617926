//! Rule set for cpanel (being written).
