package peers.flink;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

import org.apache.avro.LogicalTypes;
import org.apache.avro.Schema;
import org.apache.avro.SchemaBuilder;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericRecord;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.core.fs.FileSystem;
import org.apache.flink.core.fs.Path;
import org.apache.flink.formats.avro.typeutils.GenericRecordAvroTypeInfo;
import org.apache.flink.formats.parquet.ParquetWriterFactory;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.filesystem.OutputFileConfig;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.parquet.avro.AvroParquetWriter;
import org.apache.parquet.avro.AvroWriteSupport;
import org.apache.parquet.hadoop.ParquetWriter;
import org.apache.parquet.hadoop.metadata.CompressionCodecName;
import org.apache.parquet.io.OutputFile;

/**
 * The Flink peer of the benchmark: KafkaSource (from the earliest offsets) -> one Avro GenericRecord per
 * Kafka record -> FileSink of bulk Parquet (zstd) files under an s3:// path, exactly once through
 * checkpoints (a part file is committed, i.e. its multipart upload completed, when the checkpoint that
 * closed it completes). Runs unbounded in a local environment (a MiniCluster in this JVM).
 *
 * <p>Usage: ArchiveJob BROKERS TOPIC GROUP_ID OUTPUT_URI PARALLELISM CHECKPOINT_MS, with the S3 endpoint
 * and credentials in KSA_TEST_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION.
 */
public final class ArchiveJob {
  // Static, so neither the deserializer nor the writer's builder needs to serialize a Schema.
  static final Schema HEADER = SchemaBuilder.record("Header").namespace("peers.flink").fields()
      .requiredString("key")
      .optionalBytes("value")
      .endRecord();
  static final Schema RECORD = SchemaBuilder.record("KafkaRecord").namespace("peers.flink").fields()
      .requiredInt("partition")
      .requiredLong("offset")
      .name("timestamp").type(LogicalTypes.timestampMillis().addToSchema(Schema.create(Schema.Type.LONG))).noDefault()
      .optionalBytes("key")
      .optionalBytes("value")
      .name("headers").type().array().items(HEADER).noDefault()
      .endRecord();

  public static void main(String[] args) throws Exception {
    if (args.length != 6) {
      throw new IllegalArgumentException("usage: ArchiveJob BROKERS TOPIC GROUP_ID OUTPUT_URI PARALLELISM CHECKPOINT_MS");
    }
    String brokers = args[0], topic = args[1], groupId = args[2], output = args[3];
    int parallelism = Integer.parseInt(args[4]);
    long checkpointMs = Long.parseLong(args[5]);

    // flink-s3-fs-hadoop is found on the classpath by ServiceLoader; its "s3." keys become S3A's "fs.s3a.".
    Configuration conf = new Configuration();
    conf.setString("s3.endpoint", System.getenv("KSA_TEST_S3_ENDPOINT"));
    conf.setString("s3.endpoint.region", System.getenv().getOrDefault("AWS_REGION", "us-east-1"));
    conf.setString("s3.path.style.access", "true");
    conf.setString("s3.access-key", System.getenv("AWS_ACCESS_KEY_ID"));
    conf.setString("s3.secret-key", System.getenv("AWS_SECRET_ACCESS_KEY"));
    FileSystem.initialize(conf, null);

    StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(parallelism, conf);
    env.enableCheckpointing(checkpointMs, CheckpointingMode.EXACTLY_ONCE);
    // The source makes a new record each time, so the chained sink may take it without a copy.
    env.getConfig().enableObjectReuse();

    KafkaSource<GenericRecord> source = KafkaSource.<GenericRecord>builder()
        .setBootstrapServers(brokers)
        .setTopics(topic)
        .setGroupId(groupId)
        .setStartingOffsets(OffsetsInitializer.earliest())
        .setDeserializer(new ToAvro())
        .build();

    FileSink<GenericRecord> sink = FileSink
        .forBulkFormat(new Path(output), new ParquetWriterFactory<>(ArchiveJob::parquetWriter))
        .withOutputFileConfig(OutputFileConfig.builder().withPartPrefix("part").withPartSuffix(".parquet").build())
        .build(); // bulk formats roll on every checkpoint (OnCheckpointRollingPolicy)

    env.fromSource(source, WatermarkStrategy.noWatermarks(), "kafka").sinkTo(sink).name("s3-parquet");
    env.execute("kafka-s3-archiver peer: Flink KafkaSource -> FileSink (Parquet)");
  }

  /** Parquet through Avro's GenericRecord, zstd (level 3, Parquet's default for it), 3-level lists. */
  static ParquetWriter<GenericRecord> parquetWriter(OutputFile out) throws java.io.IOException {
    return AvroParquetWriter.<GenericRecord>builder(out)
        .withSchema(RECORD)
        .withDataModel(GenericData.get())
        .withCompressionCodec(CompressionCodecName.ZSTD)
        .config(AvroWriteSupport.WRITE_OLD_LIST_STRUCTURE, "false")
        .build();
  }

  /** A Kafka record -> a row: partition, offset, timestamp, key, value (null when absent), headers. */
  static final class ToAvro implements KafkaRecordDeserializationSchema<GenericRecord> {
    @Override
    public void deserialize(ConsumerRecord<byte[], byte[]> r, Collector<GenericRecord> out) {
      List<GenericRecord> headers = new ArrayList<>();
      for (Header h : r.headers()) {
        GenericRecord header = new GenericData.Record(HEADER);
        header.put(0, h.key());
        header.put(1, wrap(h.value()));
        headers.add(header);
      }
      GenericRecord row = new GenericData.Record(RECORD);
      row.put(0, r.partition());
      row.put(1, r.offset());
      row.put(2, r.timestamp());
      row.put(3, wrap(r.key()));
      row.put(4, wrap(r.value()));
      row.put(5, headers);
      out.collect(row);
    }

    @Override
    public TypeInformation<GenericRecord> getProducedType() {
      return new GenericRecordAvroTypeInfo(RECORD);
    }

    private static ByteBuffer wrap(byte[] bytes) {
      return bytes == null ? null : ByteBuffer.wrap(bytes);
    }
  }
}
