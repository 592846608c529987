//! The UOp IR: dtypes, devices, ops and the interned node graph.

pub mod device;
pub mod dtype;
pub mod inline;
pub mod node;
pub mod op;
pub mod reduce_order;
pub mod table;

pub use device::{Backend, Device, DeviceSpec};
pub use dtype::DType;
pub use node::{Arg, Graph, KArg, Node, NodeId};
pub use op::Op;
pub use reduce_order::ReduceOrder;
pub use table::OpInfo;
