// Package hfwrite gives the tests and integration/genarchives the Arrow schema that Hugging Face
// `datasets` writes for an image classification set (its Arrow cache files, and Parquet files of
// datasets >= 4.6), written by the Apache Arrow Go library, independently of layout/hfarrow
// (which reads it).
package hfwrite

import (
	"encoding/json"

	"github.com/apache/arrow-go/v18/arrow"
)

// Schema is the schema of an image set whose labels name the classes names: the column image,
// struct{bytes: binary, path: string}, the column label, int64, and the features in the
// "huggingface" metadata (image an Image feature, label a ClassLabel of names).
func Schema(names []string) *arrow.Schema {
	js, err := json.Marshal(names)
	if err != nil {
		panic(err) // a []string always marshals
	}
	meta := `{"info": {"features": {"image": {"decode": true, "id": null, "_type": "Image"}, "label": {"names": ` + string(js) + `, "id": null, "_type": "ClassLabel"}}}}`
	m := arrow.NewMetadata([]string{"huggingface"}, []string{meta})
	return arrow.NewSchema([]arrow.Field{
		{Name: "image", Type: arrow.StructOf(
			arrow.Field{Name: "bytes", Type: arrow.BinaryTypes.Binary, Nullable: true},
			arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true},
		{Name: "label", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, &m)
}
