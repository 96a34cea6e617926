//! Rule set for dokuwiki (being written).
