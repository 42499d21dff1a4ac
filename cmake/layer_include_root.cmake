# The layering of docs/design.md (decision 12), enforced by the compiler. Each layer's library
# compiles against an include root of its own that holds a link to its folder and nothing else; the
# roots of the layers below reach it through target_link_libraries (kernels -> engine -> layers,
# data -> train). An #include that goes up or sideways (kernels/ naming engine/, data/ naming
# layers/) then finds no file and fails to build. tests/layering checks that it does.
function(cnn_layer_include_root layer out_var)
  set(root ${PROJECT_BINARY_DIR}/layer_roots/${layer})
  file(MAKE_DIRECTORY ${root})
  if(NOT EXISTS ${root}/${layer})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${layer} ${root}/${layer} SYMBOLIC)
  endif()
  set(${out_var} ${root} PARENT_SCOPE)
endfunction()
