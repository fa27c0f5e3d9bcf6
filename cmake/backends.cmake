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
