//! The decode benchmark's orders (`avro_order.rs`) as JSON, the same fields and values, typed by the
//! same schema (`--value-format json --value-schema`).

/// Order `i` as JSON: about 1.3 KiB (ten items, five attributes, a long note).
pub fn json_order(i: usize) -> Vec<u8> {
    let items: Vec<String> = (0..10)
        .map(|k| format!(r#"{{"sku":"sku-{:08}","qty":{},"price":{}}}"#, i * 10 + k, k + 1, k as f64 * 1.25))
        .collect();
    let attrs: Vec<String> =
        (0..5).map(|k| format!(r#""attribute-{k}":"value of attribute {k} for order {i}""#)).collect();
    format!(
        r#"{{"id":{i},"customer":"customer-{}","amount":"{}.{:02}","at":{},"status":"{}","note":"{}","items":[{}],"attrs":{{{}}}}}"#,
        i % 997,
        (i % 30_000) / 100,
        (i % 30_000) % 100,
        1_767_261_600_000 + i as i64,
        ["NEW", "PAID", "SENT"][i % 3],
        "a note about this order, ".repeat(16),
        items.join(","),
        attrs.join(","),
    )
    .into_bytes()
}
