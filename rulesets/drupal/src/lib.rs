//! Rule set for drupal (being written).
