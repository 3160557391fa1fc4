//go:build integration

package integration

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/minio/minio-go/v7"

	"github.com/aifs/aifs/integration/hfwrite"
	"github.com/aifs/aifs/internal/tfwrite"
)

// This file tests the formats of rows that aifs index reads in place: TFRecord files written
// by internal/tfwrite (the documented framing, with its masked CRC32Cs), and Hugging Face Arrow
// and Parquet files written by the Apache Arrow Go library with the schema metadata `datasets`
// writes.

// treeImage is a file of the shared JPEG tree: its class directory, name and bytes.
type treeImage struct {
	class, name string
	data        []byte
}

// jpegImages reads the shared JPEG ImageFolder tree: its classes in sorted order and its
// images in path order.
func jpegImages(t *testing.T) (src string, classes []string, images []treeImage) {
	src, _ = jpegSet(t)
	dirs, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		classes = append(classes, d.Name())
		files, err := os.ReadDir(filepath.Join(src, d.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(src, d.Name(), f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			images = append(images, treeImage{d.Name(), f.Name(), data})
		}
	}
	if len(images) != jpegFiles || len(classes) != jpegClasses {
		t.Fatalf("the JPEG tree has %d images in %d classes, want %d in %d", len(images), len(classes), jpegFiles, jpegClasses)
	}
	return src, classes, images
}

// writeTFRecords writes images as files shards of TFRecord records, with the keys of the
// ImageNet script (image/encoded, image/class/label from 1, image/class/synset,
// image/filename), record i into shard i%shards; two more records have no image and no label.
func writeTFRecords(t *testing.T, dir string, classes []string, images []treeImage, shards int) {
	files := make([][]byte, shards)
	for i, img := range images {
		ex := tfwrite.Example(tfwrite.Bytes("image/encoded", img.data), tfwrite.Int("image/class/label", int64(slices.Index(classes, img.class)+1)),
			tfwrite.Bytes("image/class/synset", []byte(img.class)), tfwrite.Bytes("image/filename", []byte(img.name)))
		files[i%shards] = tfwrite.AppendRecord(files[i%shards], ex)
	}
	files[0] = tfwrite.AppendRecord(files[0], tfwrite.Example(tfwrite.Bytes("image/filename", []byte("noimage.JPEG")), tfwrite.Int("image/class/label", 1)))
	files[0] = tfwrite.AppendRecord(files[0], tfwrite.Example(tfwrite.Bytes("image/encoded", images[0].data)))
	for i, f := range files {
		if err := os.WriteFile(filepath.Join(dir, "train-"+strconv.Itoa(i)+".tfrecord"), f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestIndexTFRecordImageFolder writes the JPEG tree as TFRecord files, indexes them with --view
// imagefolder (the format told by content) and mounts them: torchvision's ImageFolder finds the
// tree's classes and samples, and a DataLoader decodes identical tensors; the records without
// an image or a label are counted and never served. The tree view names records ROW.jpg and
// serves their bytes; a GZIP TFRecord is refused with what to do.
func TestIndexTFRecordImageFolder(t *testing.T) {
	src, classes, images := jpegImages(t)
	dir := t.TempDir()
	writeTFRecords(t, dir, classes, images, 3)
	set := filepath.Join(t.TempDir(), "view")
	r := mustAifs(t, "index", "--view", "imagefolder", dir, set)
	if !strings.Contains(r.stdout, strconv.Itoa(jpegFiles)+" samples in "+strconv.Itoa(jpegClasses)+" classes") ||
		!strings.Contains(r.stdout, "2 records left out") || !strings.Contains(r.stdout, "train-0.tfrecord: record") {
		t.Errorf("summary: %s", r)
	}
	mnt := mountSet(t, set)
	t.Log(torchCheck(t, "imagefolder", src, mnt))
	t.Log(torchCheck(t, "loader", src, mnt, "--workers", "2"))

	tree := filepath.Join(t.TempDir(), "tree")
	mustAifs(t, "index", "--quiet", "--format", "tfrecord", "--no-checksums", filepath.Join(dir, "train-1.tfrecord"), tree)
	tmnt := mountSet(t, tree)
	got, err := os.ReadFile(filepath.Join(tmnt, "train-1", "000.jpg"))
	if err != nil || !bytes.Equal(got, images[1].data) {
		t.Errorf("tree view: train-1/000.jpg: %d bytes, %v; want image 1's %d bytes", len(got), err, len(images[1].data))
	}

	data, err := os.ReadFile(filepath.Join(dir, "train-2.tfrecord"))
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(data)
	zw.Close()
	gzPath := filepath.Join(t.TempDir(), "train.tfrecord")
	if err := os.WriteFile(gzPath, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := aifs(t, "index", "--format", "tfrecord", gzPath, filepath.Join(t.TempDir(), "gz")); r.code == 0 ||
		!strings.Contains(r.stderr, "train.tfrecord") || !strings.Contains(r.stderr, "GZIP") || !strings.Contains(r.stderr, "uncompressed") {
		t.Errorf("a GZIP TFRecord: %s", r)
	}
}

// TestIndexTFRecordTFDS writes the JPEG tree as TFRecord files with TFDS's keys (image, label
// from 0, file_name) and its label.labels.txt, named as TFDS names its files, indexes them with
// --view imagefolder --class-names label.labels.txt (the format told by content) and mounts
// them: torchvision's ImageFolder finds the tree's classes and samples, and a DataLoader decodes
// identical tensors.
func TestIndexTFRecordTFDS(t *testing.T) {
	src, classes, images := jpegImages(t)
	dir := t.TempDir()
	files := make([][]byte, 2)
	for i, img := range images {
		ex := tfwrite.Example(tfwrite.Bytes("image", img.data), tfwrite.Int("label", int64(slices.Index(classes, img.class))),
			tfwrite.Bytes("file_name", []byte(img.name)))
		files[i%2] = tfwrite.AppendRecord(files[i%2], ex)
	}
	for i, f := range files {
		if err := os.WriteFile(filepath.Join(dir, "imagenet2012-train.tfrecord-0000"+strconv.Itoa(i)+"-of-00002"), f, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	names := filepath.Join(t.TempDir(), "label.labels.txt")
	if err := os.WriteFile(names, []byte(strings.Join(classes, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	set := filepath.Join(t.TempDir(), "view")
	r := mustAifs(t, "index", "--view", "imagefolder", "--class-names", names, filepath.Join(dir, "imagenet2012-train.tfrecord-{00000..00001}-of-00002"), set)
	if !strings.Contains(r.stdout, strconv.Itoa(jpegFiles)+" samples in "+strconv.Itoa(jpegClasses)+" classes") {
		t.Errorf("summary: %s", r)
	}
	mnt := mountSet(t, set)
	t.Log(torchCheck(t, "imagefolder", src, mnt))
	t.Log(torchCheck(t, "loader", src, mnt, "--workers", "2"))
}

// hfBatches builds record batches of 100 rows of images (path "CLASS/NAME" as load_dataset's
// imagefolder builder records it), then one row with a null image and one with a null label.
func hfBatches(schema *arrow.Schema, classes []string, images []treeImage) []arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	var recs []arrow.RecordBatch
	for i := 0; i <= len(images); i++ {
		img, label := b.Field(0).(*array.StructBuilder), b.Field(1).(*array.Int64Builder)
		if i == len(images) {
			img.AppendNull()
			label.Append(0)
			img.Append(true)
			img.FieldBuilder(0).(*array.BinaryBuilder).Append(images[0].data)
			img.FieldBuilder(1).(*array.StringBuilder).AppendNull()
			label.AppendNull()
		} else {
			img.Append(true)
			img.FieldBuilder(0).(*array.BinaryBuilder).Append(images[i].data)
			img.FieldBuilder(1).(*array.StringBuilder).Append("/data/" + images[i].class + "/" + images[i].name)
			label.Append(int64(slices.Index(classes, images[i].class)))
		}
		if b.Field(0).Len() >= 100 || i == len(images) {
			recs = append(recs, b.NewRecordBatch())
		}
	}
	return recs
}

// TestIndexHFImageFolder writes the JPEG tree as an Arrow IPC stream (what load_dataset
// caches), indexes it with --view imagefolder and --schema-class-names (the format told by
// content) and mounts it: torchvision's ImageFolder finds the tree's classes and samples, and a
// DataLoader decodes identical tensors; the rows with a null image or label are counted and
// never served. A snappy Parquet file of the same rows is refused with what to do.
func TestIndexHFImageFolder(t *testing.T) {
	src, classes, images := jpegImages(t)
	schema := hfwrite.Schema(classes)
	recs := hfBatches(schema, classes, images)
	dir := t.TempDir()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema))
	for _, rec := range recs {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data-00000-of-00001.arrow"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	set := filepath.Join(t.TempDir(), "view")
	r := mustAifs(t, "index", "--view", "imagefolder", "--schema-class-names", dir, set)
	if !strings.Contains(r.stdout, strconv.Itoa(jpegFiles)+" samples in "+strconv.Itoa(jpegClasses)+" classes") ||
		!strings.Contains(r.stdout, "2 rows left out") || !strings.Contains(r.stdout, "row "+strconv.Itoa(len(images))+": no image") {
		t.Errorf("summary: %s", r)
	}
	if r := mustAifs(t, "verify", set); !strings.Contains(r.stdout, "ok: "+strconv.Itoa(jpegFiles)+" samples") {
		t.Errorf("aifs verify %s: %s", set, r)
	}
	mnt := mountSet(t, set)
	t.Log(torchCheck(t, "imagefolder", src, mnt))
	t.Log(torchCheck(t, "loader", src, mnt, "--workers", "2"))

	var pq bytes.Buffer
	pw, err := pqarrow.NewFileWriter(schema, &pq, parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Snappy)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		if err := pw.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	pqPath := filepath.Join(t.TempDir(), "train-00000-of-00001.parquet")
	if err := os.WriteFile(pqPath, pq.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := aifs(t, "index", pqPath, filepath.Join(t.TempDir(), "pq")); r.code == 0 ||
		!strings.Contains(r.stderr, "train-00000-of-00001.parquet") || !strings.Contains(r.stderr, "SNAPPY") || !strings.Contains(r.stderr, "datasets >= 4.6") {
		t.Errorf("a snappy Parquet file: %s", r)
	}
}

// TestIndexTFRecordS3 uploads the JPEG tree written as TFRecord files (named as the ImageNet
// script names them, without an extension) to the bucket, indexes them there with --view
// imagefolder (a brace pattern, the format told by content), verifies them and mounts them:
// ImageFolder finds the tree's classes and samples.
func TestIndexTFRecordS3(t *testing.T) {
	srv := s3Server(t)
	src, classes, images := jpegImages(t)
	dir := t.TempDir()
	writeTFRecords(t, dir, classes, images, 2)
	for i := range 2 {
		data, err := os.ReadFile(filepath.Join(dir, "train-"+strconv.Itoa(i)+".tfrecord"))
		if err != nil {
			t.Fatal(err)
		}
		key := "tf/train-0000" + strconv.Itoa(i) + "-of-00002"
		if _, err := srv.Client().PutObject(context.Background(), srv.Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	url := "s3://" + srv.Bucket + "/tf"
	mustAifs(t, "index", "--quiet", "--view", "imagefolder", url+"/train-{00000..00001}-of-00002", url)
	if r := mustAifs(t, "verify", url); !strings.Contains(r.stdout, "ok: "+strconv.Itoa(jpegFiles)+" samples") {
		t.Errorf("aifs verify %s: %s", url, r)
	}
	mnt := mountSet(t, url, "--cache-dir", filepath.Join(t.TempDir(), "cache"))
	t.Log(torchCheck(t, "imagefolder", src, mnt))
}

// TestIndexHFS3 uploads the JPEG tree written as an Arrow IPC file (footer first: read at any
// offset) and an uncompressed PLAIN Parquet file (as datasets >= 4.6 writes them), its rows split
// between the two, indexes them in the bucket with --view imagefolder --schema-class-names (the
// format told by content), verifies them (the files' checksums come from the same reads as the
// images') and mounts them: ImageFolder finds the tree's classes and samples.
func TestIndexHFS3(t *testing.T) {
	srv := s3Server(t)
	src, classes, images := jpegImages(t)
	schema := hfwrite.Schema(classes)
	recs := hfBatches(schema, classes, images)
	half := len(recs) / 2
	var arrowFile, pq bytes.Buffer
	fw, err := ipc.NewFileWriter(&arrowFile, ipc.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	pw, err := pqarrow.NewFileWriter(schema, &pq, parquet.NewWriterProperties(parquet.WithDictionaryDefault(false),
		parquet.WithCompression(compress.Codecs.Uncompressed), parquet.WithMaxRowGroupLength(100)), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	for i, rec := range recs {
		if i < half {
			err = fw.Write(rec)
		} else {
			err = pw.Write(rec)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	for key, data := range map[string][]byte{"hf/train-00000-of-00002.arrow": arrowFile.Bytes(), "hf/train-00001-of-00002.parquet": pq.Bytes()} {
		if _, err := srv.Client().PutObject(context.Background(), srv.Bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	url := "s3://" + srv.Bucket + "/hf"
	r := mustAifs(t, "index", "--view", "imagefolder", "--schema-class-names", url+"/", url)
	if !strings.Contains(r.stdout, strconv.Itoa(jpegFiles)+" samples in "+strconv.Itoa(jpegClasses)+" classes") || !strings.Contains(r.stdout, "2 rows left out") {
		t.Errorf("summary: %s", r)
	}
	if r := mustAifs(t, "verify", url); !strings.Contains(r.stdout, "ok: "+strconv.Itoa(jpegFiles)+" samples") {
		t.Errorf("aifs verify %s: %s", url, r)
	}
	mnt := mountSet(t, url, "--cache-dir", filepath.Join(t.TempDir(), "cache"))
	t.Log(torchCheck(t, "imagefolder", src, mnt))
}
