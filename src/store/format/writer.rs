//! Writing frames to Parquet (every span part, rollups, turn summaries),
//! a span frame's columns' encodings chosen rather than guessed, and a row
//! group's pages encoded and compressed on polars' thread pool.
//!
//! Polars' writer tries a dictionary for every string and integer column
//! chunk: it estimates the chunk's distinct values (a HyperLogLog pass) and,
//! below three in four, builds the dictionary. For a span frame many of
//! those attempts are wasted: ids, hashes, JSON blobs and timestamps are
//! nearly unique (or, for a trace id, repeat a few times, which zstd finds
//! anyway). So [`PLAIN`]'s columns are written plain, and the others (names,
//! kinds, services, classes: few values, many rows) get polars' own
//! attempt. The values, types, statistics and schema are what polars'
//! writer writes; those columns' pages differ, and a frame becomes one row
//! group per chunk (the caller sizes them).
//!
//! A row group's columns are encoded and compressed on polars' thread pool
//! (polars' writer compresses on the calling thread); the compressed pages
//! are then written in column order.

use std::io::Write;

use polars::prelude::{
    CompatLevel, DataFrame, DataType, ParquetCompression, PlSmallStr, PolarsError, PolarsResult,
    Schema, SchemaExt,
};
use polars_core::runtime::RAYON;
use polars_parquet::parquet::page::CompressedPage;
use polars_parquet::parquet::CowBuffer;
use polars_parquet::read::fallible_streaming_iterator;
use polars_parquet::write::{
    array_to_columns, compress, get_dtype_encoding, CompressionOptions, DynIter,
    DynStreamingIterator, Encoding, FileWriter, ParquetType, SchemaDescriptor, StatisticsOptions,
    Version, WriteOptions,
};
use rayon::prelude::*;

use super::frame;

/// The columns of the span schema ([`frame::schema`]) written plain:
/// nearly one value per row, so a dictionary attempt is work for nothing.
/// A frame of any other schema (rollups, turn summaries) keeps polars'
/// choice for every column.
pub const PLAIN: [&str; 13] = [
    "trace_id",
    "span_id",
    "parent_span_id",
    "start_ns",
    "end_ns",
    "duration_ns",
    "tool_call_id",
    "tool_args_hash",
    "tool_result_hash",
    "turn_id",
    "agent_call_id",
    "attributes",
    "events",
];

/// A Parquet file written frame by frame: every chunk of a frame becomes a
/// row group (rechunk a frame first for one).
pub struct SpanWriter<W: Write> {
    schema: Schema,
    writer: FileWriter<W>,
    encodings: Vec<Vec<Encoding>>,
    options: WriteOptions,
}

impl<W: Write> SpanWriter<W> {
    /// A writer of frames with `schema`'s columns, compressed with
    /// `compression`, statistics as polars writes them.
    pub fn new(
        out: W,
        schema: &Schema,
        compression: ParquetCompression,
    ) -> PolarsResult<SpanWriter<W>> {
        let arrow = schema.to_arrow(CompatLevel::newest());
        let spans = *schema == frame::schema();
        let encodings = arrow
            .iter_values()
            .map(|field| {
                let mut e = get_dtype_encoding(&field.dtype);
                if spans && PLAIN.contains(&field.name.as_str()) {
                    e.fill(Encoding::Plain);
                }
                e
            })
            .collect();
        let options = WriteOptions {
            statistics: StatisticsOptions::default(),
            compression: CompressionOptions::from(compression),
            version: Version::V1,
            data_page_size: None,
        };
        Ok(SpanWriter {
            schema: schema.clone(),
            writer: FileWriter::try_new(out, arrow, options)?,
            encodings,
            options,
        })
    }

    /// The file's Parquet schema (what a copied row group must match).
    pub fn parquet_schema(&self) -> &SchemaDescriptor {
        self.writer.parquet_schema()
    }

    /// Append `df`, one row group per chunk (one in all if its columns'
    /// chunks are not aligned).
    pub fn write(&mut self, df: &DataFrame) -> PolarsResult<()> {
        if df.should_rechunk() {
            let mut df = df.clone();
            df.rechunk_mut();
            return self.write(&df);
        }
        if **df.schema() != self.schema {
            return Err(PolarsError::SchemaMismatch(
                mismatch(&self.schema, df.schema()).into(),
            ));
        }
        let fields: Vec<ParquetType> = self.writer.parquet_schema().fields().to_vec();
        for batch in df.iter_chunks(CompatLevel::newest(), false) {
            let rows = batch.len();
            if rows == 0 {
                continue;
            }
            let columns = encode(batch.columns(), &fields, &self.encodings, self.options)?;
            self.write_row_group(rows as u64, &columns)?;
        }
        Ok(())
    }

    /// Append one row group of compressed pages, column by column.
    pub fn write_row_group(
        &mut self,
        rows: u64,
        columns: &[Vec<CompressedPage>],
    ) -> PolarsResult<()> {
        let group = DynIter::new(columns.iter().map(|pages| {
            Ok(DynStreamingIterator::new(
                fallible_streaming_iterator::convert(pages.iter().map(PolarsResult::Ok)),
            ))
        }));
        self.writer.write(rows, group)
    }

    /// Write the footer; the file's size.
    pub fn finish(mut self) -> PolarsResult<u64> {
        self.writer.end(None)
    }
}

/// Where a frame's columns differ from the file's: the first column that
/// does, as expected and as found.
fn mismatch(file: &Schema, frame: &Schema) -> String {
    let show = |c: Option<(&PlSmallStr, &DataType)>| match c {
        Some((name, dtype)) => format!("`{name}` ({dtype})"),
        None => "no column".to_string(),
    };
    let n = file.len().max(frame.len());
    (0..n)
        .map(|i| (i, file.get_at_index(i), frame.get_at_index(i)))
        .find(|(_, a, b)| a != b)
        .map_or_else(
            || "the frame's columns differ from the file's".to_string(),
            |(i, a, b)| {
                format!(
                    "column {} of the file is {}, the frame's is {}",
                    i + 1,
                    show(a),
                    show(b)
                )
            },
        )
}

/// Encode and compress each column of a row group on polars' pool; the
/// pages in column order.
fn encode(
    arrays: &[polars::prelude::ArrayRef],
    fields: &[ParquetType],
    encodings: &[Vec<Encoding>],
    options: WriteOptions,
) -> PolarsResult<Vec<Vec<CompressedPage>>> {
    let one = |i: usize| -> PolarsResult<Vec<CompressedPage>> {
        let mut pages = Vec::new();
        for column in array_to_columns(
            arrays[i].as_ref(),
            fields[i].clone(),
            options,
            &encodings[i],
        )? {
            for page in column {
                let mut page = compress(page?, Vec::new(), options.compression)?;
                // The buffer was sized for the page uncompressed, and a row
                // group's pages are held until it is written.
                if let CompressedPage::Data(data) = &mut page {
                    if let CowBuffer::Owned(buffer) = data.slice_mut() {
                        buffer.shrink_to_fit();
                    }
                }
                pages.push(page);
            }
        }
        Ok(pages)
    };
    // On polars' own pool, whose threads outlive the call (a thread per
    // row group would leave each one's allocator heap behind); collected
    // in column order.
    RAYON.install(|| (0..arrays.len()).into_par_iter().map(one).collect())
}
