package azblobfence

import "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"

// Container is the part of a container's client that a [Store] uses;
// *container.Client (github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container)
// implements it. The Store makes each request through a block blob's
// client, so this package does not import the container package (which
// links Apache Arrow for its queries).
type Container interface {
	// NewBlockBlobClient returns a client of the block blob blobName in
	// the container, with the container client's pipeline: its
	// credential, transport and retry options.
	NewBlockBlobClient(blobName string) *blockblob.Client
	// URL returns the container's URL, for messages.
	URL() string
}
