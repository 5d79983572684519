// What the results file and training log readers check before an HDF5 read, and a string read that checks itself:
// HDF5 writes whatever the file declares into the buffer it is given (found by fuzzing, tests/fuzz;
// docs/testing.md, "Fuzzing").
#pragma once

#include <H5Cpp.h>

#include <string>

namespace draftlab {

// An attribute read into one value must hold one value: a 64-element integer attribute read into an int64 overran
// the stack. Throws Error "<source>: <field>: expected <expected>, got an attribute of N values".
void check_single_value(const H5::Attribute& a, const std::string& source, const std::string& field,
                        const std::string& expected);

// The `count` values of a dataset must be stored in the file before a reader allocates them: a dataspace may
// declare 2^40 rows and store none (HDF5 then returns fill values), so a 20 KB file asked for 8 TB. So the storage
// must be allocated, and the values no larger than the file could hold (compressed, at most 2048 bytes of values
// per byte: a corrupt size). Throws Error "<source>: <field>: expected N values stored in the file, got ...".
void check_values_stored(const H5::DataSet& set, hsize_t count, const std::string& source, const std::string& field);

// A string attribute's single value (check_single_value first), up to its first NUL (the writers store an empty
// string as one NUL). Not H5::Attribute::read(type, std::string&): for a variable-length string it builds the
// std::string from a null pointer when the value is null (an attribute never written has one), a crash; here that is "".
std::string read_string_attribute(const H5::Attribute& a, const std::string& source, const std::string& field);

}  // namespace draftlab
