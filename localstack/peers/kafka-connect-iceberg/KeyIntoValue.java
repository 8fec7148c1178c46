// A single message transform for the Kafka Connect + Iceberg sink peer (run.sh beside this file): copies
// the record's key (bytes from ByteArrayConverter, possibly null) into a field of the record's value,
// which must already be a struct (HoistField$Value made it one). Kafka Connect ships no transform that
// moves the key into the value, and the Iceberg sink writes only the value, so without this the table
// would not hold the keys. Compiled by run.sh at install time against connect-api; found by Kafka
// Connect's service-loader plugin discovery through META-INF/services.
package ksa.peer;

import java.util.Map;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.ConnectRecord;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.errors.DataException;
import org.apache.kafka.connect.transforms.Transformation;

public class KeyIntoValue<R extends ConnectRecord<R>> implements Transformation<R> {
  private static final String FIELD = "field";
  private static final ConfigDef CONFIG =
      new ConfigDef()
          .define(FIELD, ConfigDef.Type.STRING, "key", ConfigDef.Importance.MEDIUM,
              "Name of the value field that receives the record key");

  private String field;
  // The last value schema seen and the schema made from it: every record of the peer has the same one.
  private Schema lastIn;
  private Schema lastOut;

  @Override
  public void configure(Map<String, ?> props) {
    Object f = props.get(FIELD);
    field = f == null ? "key" : f.toString();
  }

  @Override
  public R apply(R record) {
    if (!(record.value() instanceof Struct)) {
      throw new DataException("KeyIntoValue needs a struct value (put HoistField$Value before it)");
    }
    Struct value = (Struct) record.value();
    Schema in = value.schema();
    if (in != lastIn) {
      SchemaBuilder b = SchemaBuilder.struct();
      for (Field f : in.fields()) {
        b.field(f.name(), f.schema());
      }
      b.field(field, Schema.OPTIONAL_BYTES_SCHEMA);
      lastOut = b.build();
      lastIn = in;
    }
    Struct out = new Struct(lastOut);
    for (Field f : in.fields()) {
      out.put(f.name(), value.get(f));
    }
    out.put(field, record.key());
    return record.newRecord(record.topic(), record.kafkaPartition(), record.keySchema(), record.key(),
        lastOut, out, record.timestamp());
  }

  @Override
  public ConfigDef config() {
    return CONFIG;
  }

  @Override
  public void close() {}
}
