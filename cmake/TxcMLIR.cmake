#===- TxcMLIR.cmake - find Debian's MLIR 22 and set up TableGen ------------===#
#
# We link the single libMLIR.so (and with it libLLVM.so): linking the static
# archives costs minutes per tool on a 2-core machine, and mixing the two
# registers LLVM's command-line options twice.
#
#===------------------------------------------------------------------------===#
set(TXC_LLVM_ROOT "/usr/lib/llvm-22" CACHE PATH "LLVM/MLIR 22 install prefix")
find_package(MLIR REQUIRED CONFIG PATHS "${TXC_LLVM_ROOT}/lib/cmake/mlir" NO_DEFAULT_PATH)
if(NOT LLVM_VERSION_MAJOR EQUAL 22)
  message(FATAL_ERROR "txc needs LLVM/MLIR 22, found ${LLVM_PACKAGE_VERSION} at ${MLIR_DIR}")
endif()
message(STATUS "txc: MLIR ${LLVM_PACKAGE_VERSION} from ${MLIR_DIR}")

set(MLIR_LINK_MLIR_DYLIB ON)
set(LLVM_LINK_LLVM_DYLIB ON)
set(LLVM_RUNTIME_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/bin)
set(LLVM_LIBRARY_OUTPUT_INTDIR ${CMAKE_BINARY_DIR}/lib)
set(MLIR_BINARY_DIR ${CMAKE_BINARY_DIR})

list(APPEND CMAKE_MODULE_PATH "${MLIR_CMAKE_DIR}" "${LLVM_CMAKE_DIR}")
include(TableGen)
include(AddLLVM)
include(AddMLIR)

include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
# Debian's LLVM_DEFINITIONS is one string; add_definitions wants a list.
separate_arguments(TXC_LLVM_DEFINITIONS NATIVE_COMMAND ${LLVM_DEFINITIONS})
add_definitions(${TXC_LLVM_DEFINITIONS})

set(TXC_MLIR_LIBS MLIR LLVM)

# lit and FileCheck: lit from PyPI (Debian's copy does not run as a module),
# FileCheck and not from llvm-22-tools.
find_program(TXC_LIT NAMES lit PATHS ${TXC_LLVM_ROOT}/bin)
set(TXC_FILECHECK ${TXC_LLVM_ROOT}/bin/FileCheck)

# txc_add_compiler_library(name SRCS... [DEPENDS tablegen targets] [LIBS ...])
# One library per directory, linked against libMLIR.so.
function(txc_add_compiler_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPENDS;LIBS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  if(ARG_DEPENDS)
    add_dependencies(${name} ${ARG_DEPENDS})
  endif()
  target_link_libraries(${name} PUBLIC ${ARG_LIBS} ${TXC_MLIR_LIBS})
endfunction()

# AddMLIR defines `mlir-doc`; it generates the dialect and pass reference,
# which `make docs` copies into docs/.
