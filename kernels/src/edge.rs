//! A tile's side as a neighbouring tile's update reads it: `nb` values, the halo that a
//! distributed stencil sends instead of the whole tile ([`heat_step_edges`](crate::heat_step_edges)).
//!
//! Like a [`Tile`], an edge can be without storage until a message fills it
//! ([`Edge::unallocated`]), so that a rank registering another rank's edge spends no
//! memory on it.

use crate::Tile;

/// Which side of a tile an [`Edge`] copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The first row: what the tile above reads as its south neighbour's.
    North,
    /// The last row: what the tile below reads as its north neighbour's.
    South,
    /// The first column: what the tile to the left reads as its east neighbour's.
    West,
    /// The last column: what the tile to the right reads as its west neighbour's.
    East,
}

impl Side {
    /// The four sides, in the order of [`Edges`](crate::Edges)' fields.
    pub const ALL: [Side; 4] = [Side::North, Side::South, Side::West, Side::East];
}

/// `len` values of one side of a tile (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct Edge {
    len: usize,
    data: Vec<f64>,
}

impl Edge {
    /// An edge of `len` zeros.
    pub fn zeros(len: usize) -> Edge {
        Edge {
            len,
            data: crate::tile::written_zeros(len),
        }
    }

    /// An edge of `len` values without storage yet: a distributed run's copy of another
    /// rank's edge, which takes no memory until a message fills it.
    pub fn unallocated(len: usize) -> Edge {
        Edge {
            len,
            data: Vec::new(),
        }
    }

    /// The values (empty while unallocated).
    pub fn as_slice(&self) -> &[f64] {
        &self.data
    }

    /// Copies `side` of `t` into the edge (which gets its storage if it had none).
    ///
    /// # Panics
    /// If the tile's order is not the edge's length.
    pub fn fill_from(&mut self, t: &Tile, side: Side) {
        let nb = t.nb();
        assert_eq!(
            nb, self.len,
            "Edge::fill_from: a tile of order {nb} into an edge of {}",
            self.len
        );
        if nb == 0 {
            return;
        }
        self.data.resize(nb, 0.0);
        match side {
            Side::West => self.data.copy_from_slice(t.col(0)),
            Side::East => self.data.copy_from_slice(t.col(nb - 1)),
            Side::North | Side::South => {
                let i = if side == Side::North { 0 } else { nb - 1 };
                for (j, v) in self.data.iter_mut().enumerate() {
                    *v = t.get(i, j);
                }
            }
        }
    }
}

// SAFETY: an edge's state is its `len` f64 values (a copy does not change their count);
// any bytes are valid f64 values. Without storage (`Edge::unallocated`) it gets it, zeroed,
// at the first `device_bytes_mut`, before the bytes are handed out.
unsafe impl taskwatt_runtime::DeviceData for Edge {
    fn device_bytes(&self) -> &[u8] {
        taskwatt_runtime::bytes_of(&self.data)
    }
    fn device_bytes_mut(&mut self) -> &mut [u8] {
        if self.data.is_empty() && self.len > 0 {
            self.data = crate::tile::written_zeros(self.len);
        }
        taskwatt_runtime::bytes_of_mut(&mut self.data)
    }
    fn device_len(&self) -> usize {
        self.len * std::mem::size_of::<f64>()
    }
    fn release_storage(&mut self) {
        self.data = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskwatt_runtime::DeviceData;

    #[test]
    fn each_side_is_the_row_or_column_its_neighbour_reads() {
        let t = Tile::from_fn(3, |i, j| (10 * i + j) as f64);
        let side = |s| {
            let mut e = Edge::unallocated(3);
            e.fill_from(&t, s);
            e.as_slice().to_vec()
        };
        assert_eq!(side(Side::North), [0.0, 1.0, 2.0]);
        assert_eq!(side(Side::South), [20.0, 21.0, 22.0]);
        assert_eq!(side(Side::West), [0.0, 10.0, 20.0]);
        assert_eq!(side(Side::East), [2.0, 12.0, 22.0]);
    }

    #[test]
    fn an_unallocated_edge_has_its_size_and_no_storage_until_written() {
        let mut e = Edge::unallocated(4);
        assert_eq!(e.device_len(), 32);
        assert!(e.device_bytes().is_empty());
        assert_eq!(e.device_bytes_mut().len(), 32);
        e.release_storage();
        assert!(e.as_slice().is_empty());
    }
}
