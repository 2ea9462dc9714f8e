//! Record batches into pyarrow through the Arrow C stream interface.
//!
//! The batches are wrapped in an `ArrowArrayStream` whose callbacks pyarrow calls to take each
//! batch: every buffer is handed over with a release callback that drops trawl's reference, so
//! pyarrow's arrays point at the memory trawl wrote (no copy; `pyarrow.total_allocated_bytes()`
//! does not grow, which the tests check).
use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::{RecordBatch, RecordBatchIterator};
use arrow_schema::SchemaRef;
use pyo3::prelude::*;

/// `batches` (all of `schema`) as a `pyarrow.Table`.
pub(crate) fn table(
    py: Python<'_>,
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
) -> PyResult<Py<PyAny>> {
    let reader = RecordBatchIterator::new(batches.into_iter().map(Ok), schema);
    let mut stream = Box::new(FFI_ArrowArrayStream::new(Box::new(reader)));
    let address = std::ptr::addr_of_mut!(*stream) as usize;
    let pyarrow = py.import("pyarrow")?;
    // pyarrow moves the stream out of `stream` (leaving it released, so dropping the box
    // afterwards does nothing) and owns it from here on.
    let reader = pyarrow
        .getattr("RecordBatchReader")?
        .call_method1("_import_from_c", (address,))?;
    let table = reader.call_method0("read_all")?;
    drop(stream);
    Ok(table.unbind())
}
