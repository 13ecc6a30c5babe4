// Names of value kinds, for messages.
#include "kiln/value.h"

namespace kiln {

const char* value_kind_name(ValueKind k) noexcept {
  switch (k) {
    case ValueKind::None: return "None";
    case ValueKind::Tensor: return "Tensor";
    case ValueKind::Int: return "int";
    case ValueKind::Double: return "float";
    case ValueKind::Bool: return "bool";
    case ValueKind::IntList: return "int[]";
    case ValueKind::DoubleList: return "float[]";
    case ValueKind::BoolList: return "bool[]";
    case ValueKind::TensorList: return "Tensor[]";
    case ValueKind::String: return "str";
  }
  return "invalid";
}

}  // namespace kiln
