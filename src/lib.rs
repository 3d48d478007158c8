//! ncclpm: post-mortem analysis of distributed GPU training jobs that hung or
//! died in NCCL collectives.
//!
//! The pipeline, one module per stage: [`ingest`] → [`parse`] → [`model`] →
//! [`timeline`] → [`diagnose`] → [`report`], wired by [`analyze`]. [`simulate`]
//! writes realistic jobs with known truth for testing the pipeline.

pub mod analyze;
pub mod batch;
pub mod diagnose;
pub mod grammar;
pub mod ingest;
pub mod model;
pub mod parse;
pub mod report;
pub mod simulate;
pub mod timeline;
