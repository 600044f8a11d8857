//! Row groups copied from one Parquet file into another as they are: their
//! compressed pages (dictionary and data, with their statistics) read and
//! written again without being decompressed, decoded, encoded or compressed.
//! Compaction merges flush outputs this way when they have the span schema
//! the merged part is written with ([`RawGroups::fits`]); any other part is
//! decoded as before.

use std::io::Cursor;
use std::path::Path;

use polars::prelude::{PolarsError, PolarsResult};
use polars_buffer::Buffer;
use polars_parquet::parquet::metadata::SchemaDescriptor;
use polars_parquet::parquet::page::CompressedPage;
use polars_parquet::parquet::read::{read_metadata, PageReader};

/// A Parquet file's row groups as compressed pages, column by column.
pub struct RawGroups {
    schema: SchemaDescriptor,
    /// (rows, each column's pages in order) per row group.
    groups: Vec<(usize, Vec<Vec<CompressedPage>>)>,
    /// No column repeats (a page's rows are its values).
    flat: bool,
}

impl RawGroups {
    /// Read `path` whole (one compressed part is held, never decoded).
    pub fn read(path: &Path) -> PolarsResult<RawGroups> {
        let bytes = std::fs::read(path).map_err(PolarsError::from)?;
        let file: Buffer<u8> = Buffer::from(bytes);
        let meta = read_metadata(&mut Cursor::new(file.clone()))?;
        let mut groups = Vec::with_capacity(meta.row_groups.len());
        let mut flat = true;
        for rg in &meta.row_groups {
            let mut columns = Vec::with_capacity(rg.n_columns());
            for column in rg.parquet_columns() {
                let range = column.byte_range();
                let chunk = file
                    .clone()
                    .sliced(range.start as usize..range.end as usize);
                flat &= column.descriptor().descriptor.max_rep_level == 0;
                let mut pages = PageReader::new(Cursor::new(chunk), column, vec![], usize::MAX)
                    .collect::<Result<Vec<_>, _>>()?;
                // A page read back does not know its rows (a version 1
                // header does not say), which the writer needs for the
                // offset index: in a column without repetition, its values.
                for page in &mut pages {
                    if let CompressedPage::Data(page) = page {
                        page.num_rows = Some(page.num_values());
                    }
                }
                columns.push(pages);
            }
            groups.push((rg.num_rows(), columns));
        }
        Ok(RawGroups {
            schema: meta.schema_descr,
            groups,
            flat,
        })
    }

    /// Whether its columns are exactly `schema`'s (names, order, physical
    /// and logical types, nullability) and none repeats: only then may its
    /// pages go into a file written with `schema`.
    pub fn fits(&self, schema: &SchemaDescriptor) -> bool {
        self.flat && self.schema.columns() == schema.columns()
    }

    /// Rows in all its row groups.
    pub fn rows(&self) -> usize {
        self.groups.iter().map(|(n, _)| n).sum()
    }

    /// Each row group: its rows and its columns' pages.
    pub fn groups(&self) -> impl Iterator<Item = (usize, &[Vec<CompressedPage>])> {
        self.groups.iter().map(|(n, c)| (*n, c.as_slice()))
    }
}
