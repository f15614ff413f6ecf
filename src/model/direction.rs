//! pcieperf's one vocabulary for which way data moves: [`Direction`] (`h2d`, `d2h`), and
//! [`Mode`], a direction or both at once.
//!
//! They live in the model, the lowest layer, because the model's ceilings depend on them; every
//! other layer uses these types (`engine::Direction` and `bench::results::Mode` are these). The
//! documents' words — document 001's "Write"/"Read", XDMA's C2H/H2C — are displays of them
//! (`docs/architecture.md`, "Directions"), never enums of their own.

use serde::{Deserialize, Serialize};

/// Which way data moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Host memory → device (the device issues reads; XDMA H2C; document 001's "Read").
    H2d,
    /// Device → host memory (the device issues posted writes; XDMA C2H; document 001's "Write").
    D2h,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::H2d => "h2d",
            Direction::D2h => "d2h",
        }
    }
}

impl crate::named::Named for Direction {
    const ALL: &'static [Self] = &[Direction::H2d, Direction::D2h];
    fn name(self) -> &'static str {
        Direction::name(self)
    }
}

/// What a measurement moves: one [`Direction`], or both at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// [`Direction::H2d`] alone.
    H2d,
    /// [`Direction::D2h`] alone.
    D2h,
    /// Both directions at once.
    Both,
}

impl From<Direction> for Mode {
    fn from(direction: Direction) -> Mode {
        match direction {
            Direction::H2d => Mode::H2d,
            Direction::D2h => Mode::D2h,
        }
    }
}

impl crate::named::Named for Mode {
    const ALL: &'static [Self] = &[Mode::H2d, Mode::D2h, Mode::Both];
    fn name(self) -> &'static str {
        Mode::name(self)
    }
}

impl Mode {
    /// The direction's name, or `both`.
    pub fn name(self) -> &'static str {
        self.direction().map_or("both", Direction::name)
    }

    /// The one direction moved, or `None` for both.
    pub fn direction(self) -> Option<Direction> {
        match self {
            Mode::H2d => Some(Direction::H2d),
            Mode::D2h => Some(Direction::D2h),
            Mode::Both => None,
        }
    }

    /// Directions moved per step.
    pub fn directions(self) -> &'static [Direction] {
        match self {
            Mode::H2d => &[Direction::H2d],
            Mode::D2h => &[Direction::D2h],
            Mode::Both => &[Direction::H2d, Direction::D2h],
        }
    }

    /// True when the mode moves data `direction`'s way.
    pub fn moves(self, direction: Direction) -> bool {
        self.directions().contains(&direction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::named::Named;

    #[test]
    fn a_mode_is_its_directions() {
        for &direction in Direction::ALL {
            let mode = Mode::from(direction);
            assert_eq!((mode.direction(), mode.directions(), mode.name()), (Some(direction), &[direction][..], direction.name()));
        }
        assert_eq!(Mode::Both.direction(), None);
        assert!(Direction::ALL.iter().all(|&d| Mode::Both.moves(d)));
        assert!(!Mode::H2d.moves(Direction::D2h) && !Mode::D2h.moves(Direction::H2d));
    }

    #[test]
    fn spellings_are_the_names() {
        for &mode in Mode::ALL {
            assert_eq!(serde_json::to_string(&mode).unwrap(), format!("\"{}\"", mode.name()));
            assert_eq!(Mode::from_name(mode.name()), Some(mode));
        }
        for &direction in Direction::ALL {
            assert_eq!(serde_json::to_string(&direction).unwrap(), format!("\"{}\"", direction.name()));
        }
    }
}
