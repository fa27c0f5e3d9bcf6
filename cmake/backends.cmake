# Accelerator backends, each built only when its toolkit is found; a
# missing toolkit leaves a clear "not available in this build" message at
# run time (src/backends/registry.c), never a build failure.

# The host side every GPU backend shares (no toolkit needed to build it).
target_sources(libedgerun PRIVATE src/backends/gpu/gpu-common.c)

# ---- OpenCL 1.2 through the ICD loader ---------------------------------------
option(ER_OPENCL "Build the OpenCL backend when OpenCL headers and the ICD loader are found" ON)
if(ER_OPENCL)
  find_package(OpenCL QUIET)
endif()
if(ER_OPENCL AND OpenCL_FOUND)
  set(ER_OCL_GEN ${CMAKE_BINARY_DIR}/generated/opencl-kernels.c)
  add_custom_command(
    OUTPUT ${ER_OCL_GEN}
    COMMAND ${CMAKE_COMMAND} -DIN=${PROJECT_SOURCE_DIR}/src/backends/opencl/opencl-kernels.cl
            -DOUT=${ER_OCL_GEN} -DNAME=er__opencl_source -P ${PROJECT_SOURCE_DIR}/cmake/embed.cmake
    DEPENDS ${PROJECT_SOURCE_DIR}/src/backends/opencl/opencl-kernels.cl ${PROJECT_SOURCE_DIR}/cmake/embed.cmake
    COMMENT "Embedding the OpenCL kernels")
  target_sources(libedgerun PRIVATE src/backends/opencl/opencl-backend.c ${ER_OCL_GEN})
  target_link_libraries(libedgerun PUBLIC OpenCL::OpenCL)
  target_compile_definitions(libedgerun PRIVATE ER_HAVE_OPENCL=1)
  set(ER_HAVE_OPENCL ON)
  message(STATUS "edgerun: OpenCL backend: built (${OpenCL_LIBRARIES})")
else()
  set(ER_HAVE_OPENCL OFF)
  message(STATUS "edgerun: OpenCL backend: not built (install ocl-icd-opencl-dev and opencl-headers)")
endif()

# ---- target profiles (inspect --target) read JSON with jansson ---------------
find_package(PkgConfig REQUIRED)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
target_link_libraries(libedgerun PUBLIC PkgConfig::JANSSON)

# ---- CUDA: built when nvcc is found; never a build failure without it -------
option(ER_CUDA "Build the CUDA backend when the CUDA toolkit (nvcc) is found" ON)
set(ER_HAVE_CUDA OFF)
if(ER_CUDA AND NOT ER_SANITIZE AND NOT ER_FUZZ)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Turing to Hopper; override with -DCMAKE_CUDA_ARCHITECTURES=native on a
    # machine with a GPU. Set before enable_language, which reads it.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 75 80 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit)
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND)
    target_sources(libedgerun PRIVATE src/backends/cuda/cuda-backend.c src/backends/cuda/cuda-kernels.cu)
    # The library target exists before CUDA is enabled, so it does not pick
    # up the default architectures by itself.
    set_target_properties(libedgerun PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
    target_include_directories(libedgerun PRIVATE ${CUDAToolkit_INCLUDE_DIRS})
    # The static runtime: the binary runs (and reports "no device") on
    # machines without the toolkit's shared libraries.
    target_link_libraries(libedgerun PUBLIC CUDA::cudart_static)
    target_compile_definitions(libedgerun PRIVATE ER_HAVE_CUDA=1)
    set(ER_HAVE_CUDA ON)
    message(STATUS "edgerun: CUDA backend: built (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
  else()
    message(STATUS "edgerun: CUDA backend: not built (no nvcc found; install the CUDA toolkit to build it)")
  endif()
else()
  # nvcc takes neither the sanitizer nor the fuzzer flags; those builds test
  # the shared GPU code through OpenCL.
  target_compile_definitions(libedgerun PRIVATE
    ER_CUDA_NOT_BUILT_WHY="CUDA is left out of sanitizer and fuzz builds, and when ER_CUDA is OFF")
  message(STATUS "edgerun: CUDA backend: not built (ER_CUDA is OFF, or a sanitizer/fuzz build)")
endif()
