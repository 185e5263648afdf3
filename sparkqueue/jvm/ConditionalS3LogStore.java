/*
 * sparkqueue: Delta's log store for S3 with conditional puts.
 *
 * Built from this source by sparkqueue.spark_storage (javac against the jars Spark runs with)
 * and set by sparkqueue.spark_session(storage_options=...) for the s3 and s3a schemes.
 */
package org.sparkqueue.storage;

import io.delta.storage.S3SingleDriverLogStore;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.util.Arrays;
import java.util.Iterator;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * Commits each Delta log version with a put that S3 grants only while the object is absent
 * (If-None-Match: *, through S3A's conditional create), so that writers in any number of
 * JVMs, and delta-rs, which commits the same way, never write one version twice: the loser
 * gets FileAlreadyExistsException, which Delta's commit turns into a conflict check and a
 * retry at the next version. Delta's own S3 log store guards a version only inside one JVM.
 *
 * Every put carries a random write id as object metadata. When a put fails, the object is read
 * back: holding this write's id, the commit landed and only its answer was lost (the client may
 * even have retried it into a refusal); holding another's, the version was taken; absent, the
 * error stands, unless S3 said the object exists.
 */
public class ConditionalS3LogStore extends S3SingleDriverLogStore {
    /** Hadoop's createFile() option for a create that fails if the object exists. */
    static final String CONDITIONAL = "fs.option.create.conditional.overwrite";
    static final String WRITE_ID = "sparkqueue-write-id";
    /** S3A's createFile() option that adds a header (here: user metadata) to the put. */
    static final String WRITE_ID_HEADER = "fs.s3a.create.header." + WRITE_ID;
    /** How S3A's getXAttr names that user metadata when it reads the object back. */
    static final String WRITE_ID_ATTRIBUTE = "header." + WRITE_ID;

    public ConditionalS3LogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration conf)
            throws IOException {
        if (overwrite) { // not a commit (a checkpoint's pointer): last writer wins, as in Delta
            super.write(path, actions, true, conf);
            return;
        }
        FileSystem fs = path.getFileSystem(conf);
        byte[] writeId = UUID.randomUUID().toString().getBytes(StandardCharsets.UTF_8);
        FSDataOutputStream out;
        try {
            FSDataOutputStreamBuilder<?, ?> create = fs.createFile(path).overwrite(false);
            create.must(CONDITIONAL, true);
            create.must(WRITE_ID_HEADER, new String(writeId, StandardCharsets.UTF_8));
            out = create.build();
        } catch (org.apache.hadoop.fs.FileAlreadyExistsException taken) {
            throw taken(path, taken);
        }
        try {
            while (actions.hasNext()) {
                out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
            }
        } catch (IOException | RuntimeException failed) {
            out.abort(); // close() would publish what was written so far
            throw failed;
        }
        try {
            out.close(); // the put itself
        } catch (IOException failed) {
            // Whose object is there now decides, not the error: a put whose answer was lost and
            // that the client retried is refused (412) although this very write landed.
            byte[] found = writeIdOf(fs, path, failed);
            if (found != null && Arrays.equals(found, writeId)) {
                return; // it landed; only its answer was lost
            }
            if (found != null || refused(failed)) {
                throw taken(path, failed);
            }
            throw failed;
        }
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;
    }

    /** Whether S3 refused the put because the object exists (412, or 409 for a racing put). */
    static boolean refused(Throwable failure) {
        for (Throwable cause = failure; cause != null; cause = cause.getCause()) {
            String name = cause.getClass().getSimpleName();
            if (name.equals("RemoteFileChangedException")
                    || cause instanceof org.apache.hadoop.fs.FileAlreadyExistsException) {
                return true;
            }
            String text = String.valueOf(cause.getMessage());
            if (text.contains("Status Code: 412") || text.contains("Status Code: 409")) {
                return true;
            }
        }
        return false;
    }

    /** The write id of the object at `path` (null: no object there). */
    static byte[] writeIdOf(FileSystem fs, Path path, IOException failed) throws IOException {
        try {
            if (!fs.exists(path)) {
                return null;
            }
            byte[] found = fs.getXAttr(path, WRITE_ID_ATTRIBUTE);
            return found == null ? new byte[0] : found;
        } catch (IOException | RuntimeException unknown) {
            failed.addSuppressed(unknown);
            throw failed; // the outcome is unknown: the caller must not take it for a conflict
        }
    }

    static FileAlreadyExistsException taken(Path path, Throwable cause) {
        FileAlreadyExistsException taken = new FileAlreadyExistsException(path.toString());
        taken.initCause(cause);
        return taken;
    }
}
