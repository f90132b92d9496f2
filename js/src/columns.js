// The column codec: a message's `columns` list and binary buffers as the
// arrays a ColumnDataSource holds (typed arrays without a copy where the
// alignment allows). The wire format: docs/frontend.md ("Messages");
// Python's side: encode_columns in xprof_widgets/widgets/_bokeh.py.

const TYPED_ARRAYS = {
  float64: Float64Array,
  float32: Float32Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int8: Int8Array,
  uint8: Uint8Array,
};

function asTypedArray(view, dtype) {
  const Type = TYPED_ARRAYS[dtype];
  if (Type == null) throw new Error(`unsupported dtype ${dtype}`);
  const buffer = view.buffer ?? view;
  const offset = view.byteOffset ?? 0;
  const length = view.byteLength;
  if (offset % Type.BYTES_PER_ELEMENT === 0) {
    return new Type(buffer, offset, length / Type.BYTES_PER_ELEMENT);
  }
  return new Type(buffer.slice(offset, offset + length));
}

// {name: array} from a message's column list and its buffers.
export function decodeColumns(meta, buffers) {
  const columns = {};
  for (const column of meta ?? []) {
    if (column.values != null) {
      columns[column.name] = column.values;
    } else if (column.table != null) {
      // Dictionary-encoded strings: codes in a buffer, each distinct value once.
      const codes = asTypedArray(buffers[column.buffer], column.dtype);
      columns[column.name] = Array.from(codes, (code) => column.table[code]);
    } else {
      columns[column.name] = asTypedArray(buffers[column.buffer], column.dtype);
    }
  }
  return columns;
}

// The number of rows: the length of the first column (0 when none).
export function columnLength(columns) {
  for (const value of Object.values(columns)) return value.length;
  return 0;
}
