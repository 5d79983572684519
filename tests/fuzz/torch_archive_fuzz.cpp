// torch.save() pytorch_model.bin (core/io/torch_archive.h: the zip and pickle parsing, without libtorch): the first
// and last element of every tensor's view are read, computed here in 128 bits, so a view the reader let reach
// past its storage is an ASan report (or a crash) rather than a quiet read of someone else's memory.
#include "core/io/torch_archive.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  const std::string path = fuzz::input_file(data, size, "pytorch_model.bin");
  return fuzz::expect_clean_failure([&] {
    for (const StoredTensor& t : read_torch_archive(path)) {
      if (t.sizes.size() != t.strides.size()) std::abort();
      __int128 last = t.storage_offset;
      bool empty = false;
      for (size_t k = 0; k < t.sizes.size(); ++k) {
        empty |= t.sizes[k] == 0;
        last += static_cast<__int128>(t.sizes[k] - 1) * t.strides[k];
      }
      if (empty) continue;
      const size_t element = dtype_size(t.dtype);
      // The reader's bound, checked here too: for a 1-byte dtype an element one past the end is the string's NUL,
      // inside the allocation, where ASan would not see it.
      if (t.storage_offset < 0 || last >= static_cast<__int128>(t.storage->size() / element)) std::abort();
      const auto* bytes = reinterpret_cast<const uint8_t*>(t.storage->data());
      fuzz::touch(bytes + t.storage_offset * element, element);
      fuzz::touch(bytes + static_cast<size_t>(last) * element, element);
    }
  });
}
